package metad

import (
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func method(name string) string {
	return "/" + metav1.MetadataService_ServiceDesc.ServiceName + "/" + name
}

// Policy is the MetadataService's per-method role policy (which certificate
// roles may call what). Handlers narrow it further where a role may use a
// method only for some requests (coordinatord: CreateTopic only for
// __consumer_offsets; RegisterNode/NodeHeartbeat only for the caller's own
// role).
//
//   - gateway: topic admin (create, alter, delete, truncate), reads,
//     ElectLeader, ClusterStatus, and registration + Watch for its own
//     lease and metadata cache;
//   - partitiond: registration, AlterIsr, CheckpointHwm, ReportCleanup,
//     Watch and reads;
//   - coordinatord: registration, Watch, reads, CreateTopic (offsets topic);
//   - admin (operator tools) and metad (peers, self-registration): all.
func Policy() rpc.Policy {
	all := []pki.Role{pki.RoleAdmin, pki.RoleMetad}
	with := func(roles ...pki.Role) []pki.Role { return append(append([]pki.Role{}, all...), roles...) }
	gw, pd, cd := pki.RoleGateway, pki.RolePartitiond, pki.RoleCoordinatord
	return rpc.Policy{
		method("CreateTopic"):      with(gw, cd),
		method("AlterTopicConfig"): with(gw),
		method("DeleteTopic"):      with(gw),
		method("TruncateTopic"):    with(gw),
		method("GetTopic"):         with(gw, pd, cd),
		method("ListTopics"):       with(gw, pd, cd),
		method("RegisterNode"):     with(gw, pd, cd),
		method("NodeHeartbeat"):    with(gw, pd, cd),
		method("ListNodes"):        with(gw, pd, cd),
		method("ShutdownNode"):     with(pd, cd),
		method("ElectLeader"):      with(gw),
		method("AlterIsr"):         with(pd),
		method("CheckpointHwm"):    with(pd),
		method("ReportCleanup"):    with(pd),
		method("ClusterStatus"):    with(gw, pd, cd),
		method("Watch"):            with(gw, pd, cd),
	}
}
