// Package coordfake is an in-memory fake of coordinatord's
// CoordinatorService for the tests of the roles that call a coordinator
// (metad's delete guard, coordinatord's peer fan-out, the gateway), served
// over real mTLS gRPC on loopback.
//
// It keeps groups, their members and committed offsets with the rules
// callers observe: joining or leaving bumps the group's generation and
// deals the partitions round robin, a stale generation answers
// generation_mismatch, a group with members refuses delete and reset
// (group_not_empty), TopicActivity reports the groups with members on a
// topic. It is not a second coordinatord: no sessions, no expiry, no
// offsets log, no ownership ring.
//
// Faults go through the embedded fakerpc.Controls: for example
// On("ListGroups", 0, fakerpc.Hang()) makes a peer that never answers, and
// a hook answering not_coordinator plays a moved group.
package coordfake
