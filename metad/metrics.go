package metad

import (
	"encoding/binary"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/metad/internal/fsm"
)

// metrics are metad's strata_metad_* series on the process registry.
type metrics struct {
	leaderChanges prometheus.Counter
	commands      *prometheus.CounterVec
	watchStreams  prometheus.Gauge
	watchEvents   prometheus.Counter
	watchSnaps    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Role) (*metrics, error) {
	m := &metrics{
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_metad_raft_leader_changes_total",
			Help: "Raft leader changes observed by this metad (including to no leader)."}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_metad_commands_total",
			Help: "Commands this metad proposed as Raft leader, by command type and result (ok or the error code)."}, []string{"command", "result"}),
		watchStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_metad_watch_streams",
			Help: "Open Watch streams served by this metad."}),
		watchEvents: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_metad_watch_events_sent_total",
			Help: "Watch events sent (snapshots included)."}),
		watchSnaps: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_metad_watch_snapshots_sent_total",
			Help: "Full snapshots sent to Watch streams (new watchers and watchers too far behind)."}),
	}
	raftGauge := func(name, help string, f func(r *raft.Raft) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			n := s.node.Load()
			if n == nil {
				return 0
			}
			return f(n.Raft())
		})
	}
	cs := []prometheus.Collector{m.leaderChanges, m.commands, m.watchStreams, m.watchEvents, m.watchSnaps,
		raftGauge("strata_metad_raft_state", "Raft state: 0 follower, 1 candidate, 2 leader, 3 shutdown (0 before start).",
			func(r *raft.Raft) float64 { return float64(r.State()) }),
		raftGauge("strata_metad_raft_term", "Current Raft term.", func(r *raft.Raft) float64 { return float64(r.CurrentTerm()) }),
		raftGauge("strata_metad_raft_commit_index", "Raft commit index known to this metad.", func(r *raft.Raft) float64 { return float64(r.CommitIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_metad_fsm_applied_index", Help: "Raft index of the last command applied to the metadata state."}, func() float64 {
			if n := s.node.Load(); n != nil {
				return float64(n.FSM().AppliedIndex())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_metad_revision", Help: "Watch revision of the last metadata change."}, func() float64 {
			if n := s.node.Load(); n != nil {
				return float64(n.FSM().Revision())
			}
			return 0
		}),
		newClusterCollector(s),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "strata_metad_raft_transport_rejected_total", Help: "Inbound Raft connections refused in the mTLS handshake (wrong CA or role)."}, func() float64 {
			return float64(s.stream.Rejected())
		}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *metrics) observeCommand(payload proto.Message, err error) {
	result := "ok"
	if err != nil {
		result = errcode.CodeOf(err)
	}
	m.commands.WithLabelValues(commandName(payload), result).Inc()
}

var commandNames sync.Map // message full name -> command type name

// commandName is the command type name (CREATE_TOPIC, ...) of a payload,
// taken from the FSM's own encoding so labels match the log's type ids.
func commandName(m proto.Message) string {
	full := m.ProtoReflect().Descriptor().FullName()
	if v, ok := commandNames.Load(full); ok {
		return v.(string)
	}
	name := "unknown"
	if b, err := fsm.Encode(m.ProtoReflect().Type().New().Interface()); err == nil && len(b) >= 3 {
		name = fsm.Type(binary.BigEndian.Uint16(b[1:3])).String()
	}
	commandNames.Store(full, name)
	return name
}
