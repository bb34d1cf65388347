{{/*
Shared parts of the four role workloads. Names are the role names (metad,
partitiond, coordinatord, gateway): node ids are pod names and the DNS
names below are what certificates and peers use, so one release per
namespace.
*/}}

{{/* Labels of every object of role .role. */}}
{{- define "strata.labels" -}}
app.kubernetes.io/name: strata
app.kubernetes.io/component: {{ .role }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- end }}

{{- define "strata.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* metad-0.metad.<ns>.svc:9190,... : every metad's RPC address. */}}
{{- define "strata.metadAddrs" -}}
{{- $ns := .Release.Namespace -}}
{{- $out := list -}}
{{- range $i := until (int .Values.metad.replicas) -}}
{{- $out = append $out (printf "metad-%d.metad.%s.svc:9190" $i $ns) -}}
{{- end -}}
{{- join "," $out -}}
{{- end }}

{{/* metad-0=metad-0.metad.<ns>.svc:9191,... : the static Raft voters. */}}
{{- define "strata.metadVoters" -}}
{{- $ns := .Release.Namespace -}}
{{- $out := list -}}
{{- range $i := until (int .Values.metad.replicas) -}}
{{- $out = append $out (printf "metad-%d=metad-%d.metad.%s.svc:9191" $i $i $ns) -}}
{{- end -}}
{{- join "," $out -}}
{{- end }}

{{/* Values that cannot work together fail the render. */}}
{{- define "strata.validate" -}}
{{- $r := .Values.replication -}}
{{- $pd := int .Values.partitiond.replicas -}}
{{- if gt (int $r.factor) $pd -}}
{{- fail (printf "replication.factor %d exceeds partitiond.replicas %d: topic creation would fail with invalid_replication_factor" (int $r.factor) $pd) -}}
{{- end -}}
{{- if gt (int $r.offsetsFactor) $pd -}}
{{- fail (printf "replication.offsetsFactor %d exceeds partitiond.replicas %d: coordinatord could not create __consumer_offsets" (int $r.offsetsFactor) $pd) -}}
{{- end -}}
{{- if gt (int $r.minInSyncReplicas) (int $r.factor) -}}
{{- fail (printf "replication.minInSyncReplicas %d exceeds replication.factor %d: acks=all could never succeed" (int $r.minInSyncReplicas) (int $r.factor)) -}}
{{- end -}}
{{- if eq (mod (int .Values.metad.replicas) 2) 0 -}}
{{- fail (printf "metad.replicas %d is even: a Raft group of an even size tolerates no more failures than one voter fewer" (int .Values.metad.replicas)) -}}
{{- end -}}
{{- if and .Values.tls.create (or (not .Values.tls.caCrt) (not .Values.tls.caKey)) -}}
{{- fail "tls.create needs tls.caCrt and tls.caKey" -}}
{{- end -}}
{{- end }}

{{/* Pod-level settings shared by every role: non-root, pull secrets, scheduling. */}}
{{- define "strata.podSpec" -}}
{{- $v := index .root.Values .role -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
terminationGracePeriodSeconds: 30
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The init container issuing the pod's node certificate: the only
container that mounts the CA key. */}}
{{- define "strata.certsInit" -}}
{{- $ns := .root.Release.Namespace -}}
initContainers:
  - name: certs
    image: {{ include "strata.image" .root }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    command: ["strata", "certs", "issue", "--dir", "/ca-key", "--role", "{{ .role }}", "--node-id", "$(POD_NAME)",
              "--dns", "$(POD_NAME),$(POD_NAME).{{ .role }},$(POD_NAME).{{ .role }}.{{ $ns }}.svc,{{ .role }}.{{ $ns }}.svc,localhost", "--ip", "$(POD_IP)", "--out", "/tls", "--name", "node"]
    env:
      - name: POD_NAME
        valueFrom: {fieldRef: {fieldPath: metadata.name}}
      - name: POD_IP
        valueFrom: {fieldRef: {fieldPath: status.podIP}}
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    volumeMounts:
      - {name: ca-key, mountPath: /ca-key, readOnly: true}
      - {name: tls, mountPath: /tls}
{{- end }}

{{/* Environment every role container starts with. */}}
{{- define "strata.envHead" -}}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_IP
  valueFrom: {fieldRef: {fieldPath: status.podIP}}
- name: STRATA_NODE_ID
  value: "$(POD_NAME)"
- name: STRATA_DATA_DIR
  value: "/data"
{{- end }}

{{/* Environment every role container ends with: mTLS files, ops ports,
logging, then the role's extraEnv. */}}
{{- define "strata.envTail" -}}
{{- $v := index .root.Values .role -}}
- name: STRATA_TLS_CA
  value: "/ca/ca.crt"
- name: STRATA_TLS_CERT
  value: "/tls/node.crt"
- name: STRATA_TLS_KEY
  value: "/tls/node.key"
- name: HEALTH_CHECK_PORT
  value: "9080"
- name: EXPORTER_PORT
  value: "9100"
- name: ENABLE_EXPORTER
  value: {{ .root.Values.metrics.enabled | quote }}
- name: STRATA_LOG_FORMAT
  value: {{ .root.Values.logFormat | quote }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Ports, probes, security context and mounts of a role container. */}}
{{- define "strata.containerTail" -}}
{{- $v := index .root.Values .role -}}
ports:
  {{- range .ports }}
  - {name: {{ .name }}, containerPort: {{ .port }}}
  {{- end }}
  - {name: health, containerPort: 9080}
  {{- if .root.Values.metrics.enabled }}
  - {name: metrics, containerPort: 9100}
  {{- end }}
readinessProbe:
  httpGet: {path: /ready, port: health}
  periodSeconds: 2
  failureThreshold: 3
livenessProbe:
  httpGet: {path: /live, port: health}
  periodSeconds: 10
  failureThreshold: 6
startupProbe:
  httpGet: {path: /live, port: health}
  periodSeconds: 2
  failureThreshold: 60
{{- with $v.resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
volumeMounts:
  - {name: ca, mountPath: /ca, readOnly: true}
  - {name: tls, mountPath: /tls, readOnly: true}
  - {name: data, mountPath: /data}
{{- end }}

{{/* Pod volumes: the CA Secret twice (whole, for the init container; only
ca.crt, for the role container), the certificate emptyDir, and for the
stateless roles an emptyDir data directory. */}}
{{- define "strata.volumes" -}}
volumes:
  - name: ca-key
    secret: {secretName: {{ .root.Values.tls.caSecret }}}
  - name: ca
    secret: {secretName: {{ .root.Values.tls.caSecret }}, items: [{key: ca.crt, path: ca.crt}]}
  - name: tls
    emptyDir: {medium: Memory}
  {{- if .emptyData }}
  - name: data
    emptyDir: {}
  {{- end }}
{{- end }}

{{/* Pod template metadata: labels and the scrape annotations. */}}
{{- define "strata.podMeta" -}}
labels:
  {{- include "strata.labels" . | nindent 2 }}
{{- if .root.Values.metrics.enabled }}
annotations:
  prometheus.io/scrape: "true"
  prometheus.io/port: "9100"
{{- end }}
{{- end }}

{{/* A volumeClaimTemplate named data. */}}
{{- define "strata.dataClaim" -}}
{{- $s := (index .root.Values .role).storage -}}
volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      {{- with $s.storageClassName }}
      storageClassName: {{ . }}
      {{- end }}
      resources:
        requests:
          storage: {{ $s.size }}
{{- end }}

{{/* The headless Service of a role and its PodDisruptionBudget. */}}
{{- define "strata.headlessService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ .role }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "strata.labels" . | nindent 4 }}
spec:
  clusterIP: None
  # Raft peers and replicas must resolve each other before they are ready.
  publishNotReadyAddresses: true
  selector:
    app.kubernetes.io/component: {{ .role }}
  ports:
    {{- range .ports }}
    - name: {{ .name }}
      port: {{ .port }}
      targetPort: {{ .port }}
    {{- end }}
    - name: health
      port: 9080
      targetPort: 9080
    - name: metrics
      port: 9100
      targetPort: 9100
{{- end }}

{{- define "strata.pdb" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .role }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "strata.labels" . | nindent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/component: {{ .role }}
{{- end }}
