package auth

import (
	"slices"

	"github.com/strataio/strata/libs/wire"
)

// The matrix's axes and the spec-derived expectation of every cell
// (matrix_test.go runs them through the Guard).

// spec is the expectation, written from SERVICE-SPEC section 5 and the
// command families independently of rules.go: what each client command
// needs. 5.3 names CONSUME, STREAM (topic.read+group), TXN_PUBLISH
// (transaction+topic.write), SEND_OFFSETS_TO_TXN (transaction+group),
// DELETE and TRUNCATE (admin); the issue adds DELETE_GROUP and
// RESET_OFFSETS (admin); the rest follow their family: topic and cluster
// administration admin, topic reads topic.read, topic writes topic.write,
// group commands group, transaction commands transaction, and the
// connection's own commands (NEGOTIATE, HELP, EXIT, AUTH) nothing.
// METADATA ("metadata") is the one command either direction may use: a
// producer needs it for routing as much as a consumer does.
var spec = map[wire.Command]string{
	wire.CmdNegotiate: "open", wire.CmdHelp: "open", wire.CmdExit: "open", wire.CmdAuth: "open",

	wire.CmdCreate: "admin", wire.CmdAlterTopicConfig: "admin", wire.CmdDelete: "admin", wire.CmdTruncate: "admin",
	wire.CmdClusterStatus: "admin", wire.CmdElectLeader: "admin", wire.CmdListCluster: "admin",
	wire.CmdDeleteGroup: "admin", wire.CmdResetOffsets: "admin",
	// Issue 13: the transaction escape hatch is admin only once AUTH exists.
	wire.CmdListTxns: "admin", wire.CmdAbortTxn: "admin",

	wire.CmdList: "read", wire.CmdDescribe: "read", wire.CmdMetadata: "metadata", wire.CmdListOffsets: "read",
	wire.CmdBrowseMessages: "read", wire.CmdReadStream: "read", wire.CmdReadStreamHistory: "read",
	wire.CmdStreamVersion: "read", wire.CmdReadSnapshot: "read", wire.CmdAggregateReplayProof: "read",
	wire.CmdAggregateEventRangeRead: "read",
	wire.CmdConsume:                 "read+group", wire.CmdStream: "read+group",

	wire.CmdPublish: "write", wire.CmdAppendStream: "write", wire.CmdSaveSnapshot: "write",

	wire.CmdFindCoordinator: "group", wire.CmdRegisterGroup: "group", wire.CmdJoinGroup: "group",
	wire.CmdSyncGroup: "group", wire.CmdLeaveGroup: "group", wire.CmdHeartbeat: "group", wire.CmdGroupStatus: "group",
	wire.CmdListGroups: "group", wire.CmdCommitOffset: "group", wire.CmdBatchCommit: "group", wire.CmdFetchOffset: "group",

	wire.CmdInitProducerID: "txn", wire.CmdBeginTxn: "txn", wire.CmdEndTxn: "txn", wire.CmdTxnStatus: "txn",
	wire.CmdTxnPublish: "txn+write", wire.CmdTxnAppendStream: "txn+write", wire.CmdSendOffsetsToTxn: "txn+group",
}

// specNeeds is the permission list (in spec order) and topic direction of
// a spec category.
func specNeeds(category string) (needs []string, dir string) {
	switch category {
	case "open":
		return nil, ""
	case "admin":
		return []string{"admin"}, ""
	case "read":
		return []string{"topic.read"}, "read"
	case "metadata":
		return nil, "read or write"
	case "read+group":
		return []string{"topic.read", "group"}, "read"
	case "write":
		return []string{"topic.write"}, "write"
	case "group":
		return []string{"group"}, ""
	case "txn":
		return []string{"transaction"}, ""
	case "txn+write":
		return []string{"transaction", "topic.write"}, "write"
	case "txn+group":
		return []string{"transaction", "group"}, ""
	}
	panic("unknown category " + category)
}

// A principal kind is an axis value of the matrix.
type kind struct {
	name  string
	perms []string // held permissions; nil for none and bad token
	how   string   // "none", "bad" (wrong token), "auth" (AUTH command), "inline" (principal= auth_token=)
}

var kinds = func() []kind {
	ks := []kind{{name: "none", how: "none"}, {name: "bad token", how: "bad"}, {name: "bad token inline", how: "bad-inline"}}
	for _, p := range []string{"admin", "topic.read", "topic.write", "group", "transaction", "*"} {
		ks = append(ks, kind{name: p, perms: []string{p}, how: "auth"}, kind{name: p + " inline", perms: []string{p}, how: "inline"})
	}
	return ks
}()

// policies are the topic-policy axis: the matrix's principals are named
// after their permission, so "acl, listed" lists the principal in both
// ACLs and "acl, other" lists someone else.
var policies = []struct {
	name string
	pol  func(principal string) Policy
}{
	{"open", func(string) Policy { return Policy{AuthPolicy: "open"} }},
	{"deny_read", func(string) Policy { return Policy{AuthPolicy: "deny_read"} }},
	{"deny_write", func(string) Policy { return Policy{AuthPolicy: "deny_write"} }},
	{"acl, listed", func(p string) Policy { return Policy{AuthPolicy: "acl", ReadACL: "x," + p, WriteACL: p + ",y"} }},
	{"acl, *", func(string) Policy { return Policy{AuthPolicy: "acl", ReadACL: "*", WriteACL: "*"} }},
	{"acl, other", func(string) Policy { return Policy{AuthPolicy: "acl", ReadACL: "x", WriteACL: "y"} }},
	{"acl, empty", func(string) Policy { return Policy{AuthPolicy: "acl"} }},
}

// expect is the spec's answer for one cell: "" (allowed) or the denial as
// `code field=value`.
func expect(cmd wire.Command, k kind, policy string) string {
	needs, dir := specNeeds(spec[cmd])
	if spec[cmd] == "open" {
		return ""
	}
	switch k.how {
	case "none", "bad":
		return "authentication_required command=" + cmd.String()
	case "bad-inline":
		return "authentication_failed"
	}
	for _, n := range needs {
		if !slices.Contains(k.perms, n) && !slices.Contains(k.perms, "*") {
			return "NOT_AUTHORIZED_FOR_OPERATION command=" + cmd.String() + " permission=" + n
		}
	}
	if dir == "read or write" {
		holdsRead := slices.Contains(k.perms, "topic.read") || slices.Contains(k.perms, "*")
		holdsWrite := slices.Contains(k.perms, "topic.write") || slices.Contains(k.perms, "*")
		allows := func(d string) bool {
			switch policy {
			case "deny_read":
				return d != "read"
			case "deny_write":
				return d != "write"
			case "acl, other", "acl, empty":
				return false
			}
			return true
		}
		switch {
		case !holdsRead && !holdsWrite:
			return "NOT_AUTHORIZED_FOR_OPERATION command=" + cmd.String() + " permission=topic.read"
		case holdsRead && allows("read") || holdsWrite && allows("write"):
			return ""
		case holdsRead:
			return "NOT_AUTHORIZED_FOR_TOPIC operation=read topic=t"
		}
		return "NOT_AUTHORIZED_FOR_TOPIC operation=write topic=t"
	}
	denied := false
	switch policy {
	case "deny_read":
		denied = dir == "read"
	case "deny_write":
		denied = dir == "write"
	case "acl, other", "acl, empty":
		denied = dir != ""
	}
	if denied {
		return "NOT_AUTHORIZED_FOR_TOPIC operation=" + dir + " topic=t" // fields in key order
	}
	return ""
}
