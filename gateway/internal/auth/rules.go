package auth

import (
	"strings"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Permission is a coarse permission a principal holds (spec 5.2).
type Permission uint8

// Permissions. All (`*`) holds every other one; admin is one permission
// among the others and does not imply them.
const (
	Admin Permission = iota
	TopicRead
	TopicWrite
	Group
	Transaction
	numPermissions
)

var permissionNames = [numPermissions]string{"admin", "topic.read", "topic.write", "group", "transaction"}

func (p Permission) String() string { return permissionNames[p] }

// allName is the permission that grants every other one.
const allName = "*"

// parsePermission reads one configured permission name.
func parsePermission(s string) (perms, bool) {
	if s == allName {
		return allPerms, true
	}
	for i, n := range permissionNames {
		if n == s {
			return 1 << i, true
		}
	}
	return 0, false
}

// perms is a set of permissions.
type perms uint8

const allPerms perms = 1<<numPermissions - 1

func (s perms) has(p Permission) bool { return s&(1<<p) != 0 }

func (s perms) String() string {
	if s == allPerms {
		return allName
	}
	var out []string
	for p := range numPermissions {
		if s.has(p) {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, "+")
}

// Access is the direction of a command's topic access, checked against the
// topic's auth_policy after the coarse permissions (spec 5.5).
type Access uint8

// Accesses.
const (
	NoTopic Access = iota
	Read
	Write
	// ReadOrWrite: either direction will do (METADATA, which producers
	// need for routing as much as consumers do): the principal needs
	// topic.read or topic.write, and the topic's policy must allow a
	// direction the principal holds.
	ReadOrWrite
)

func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	case ReadOrWrite:
		return "read or write"
	}
	return ""
}

// Rule is what a client command needs when enable_sasl is on.
type Rule struct {
	// Open commands need no authentication (the connection's own
	// commands: NEGOTIATE, HELP, EXIT, and AUTH itself).
	Open bool
	// Perms are the coarse permissions, all required, checked in this
	// order (the first missing one is named in the error); for a
	// ReadOrWrite rule, topic.read or topic.write.
	Perms []Permission
	// Topic is the access checked against the auth_policy of the topic
	// named by the command's topic parameter (or batch header).
	Topic Access
}

// Admin reports whether the command is an admin command (audited).
func (r Rule) Admin() bool {
	for _, p := range r.Perms {
		if p == Admin {
			return true
		}
	}
	return false
}

func rule(ps ...Permission) Rule {
	r := Rule{Perms: ps}
	for _, p := range ps {
		switch p {
		case TopicRead:
			r.Topic = Read
		case TopicWrite:
			r.Topic = Write
		}
	}
	return r
}

// rules is the one table of what every client command needs: spec 5.3
// names CONSUME, STREAM, TXN_PUBLISH, SEND_OFFSETS_TO_TXN, DELETE and
// TRUNCATE; the other rows follow the command's family (docs/security.md
// prints this table, generated from it). A client command without a row is
// refused (TestEveryClientCommandHasARule keeps the table complete).
var rules = map[wire.Command]Rule{
	wire.CmdNegotiate: {Open: true},
	wire.CmdHelp:      {Open: true},
	wire.CmdExit:      {Open: true},
	wire.CmdAuth:      {Open: true},

	// Topic and cluster administration.
	wire.CmdCreate:           rule(Admin),
	wire.CmdAlterTopicConfig: rule(Admin),
	wire.CmdDelete:           rule(Admin),
	wire.CmdTruncate:         rule(Admin),
	wire.CmdClusterStatus:    rule(Admin),
	wire.CmdElectLeader:      rule(Admin),
	wire.CmdListCluster:      rule(Admin),
	wire.CmdDeleteGroup:      rule(Admin),
	wire.CmdResetOffsets:     rule(Admin),
	// The transaction escape hatch (issue 13): operators', admin only.
	wire.CmdListTxns: rule(Admin),
	wire.CmdAbortTxn: rule(Admin),

	// Topic reads.
	wire.CmdList:                    rule(TopicRead),
	wire.CmdDescribe:                rule(TopicRead),
	wire.CmdMetadata:                {Perms: []Permission{TopicRead, TopicWrite}, Topic: ReadOrWrite},
	wire.CmdListOffsets:             rule(TopicRead),
	wire.CmdBrowseMessages:          rule(TopicRead),
	wire.CmdReadStream:              rule(TopicRead),
	wire.CmdReadStreamHistory:       rule(TopicRead),
	wire.CmdStreamVersion:           rule(TopicRead),
	wire.CmdReadSnapshot:            rule(TopicRead),
	wire.CmdAggregateReplayProof:    rule(TopicRead),
	wire.CmdAggregateEventRangeRead: rule(TopicRead),
	wire.CmdConsume:                 rule(TopicRead, Group),
	wire.CmdStream:                  rule(TopicRead, Group),

	// Topic writes.
	wire.CmdPublish:      rule(TopicWrite),
	wire.CmdAppendStream: rule(TopicWrite),
	wire.CmdSaveSnapshot: rule(TopicWrite),

	// Groups. FIND_COORDINATOR with a transactional_id needs transaction
	// instead (RuleFor).
	wire.CmdFindCoordinator: rule(Group),
	wire.CmdRegisterGroup:   rule(Group),
	wire.CmdJoinGroup:       rule(Group),
	wire.CmdSyncGroup:       rule(Group),
	wire.CmdLeaveGroup:      rule(Group),
	wire.CmdHeartbeat:       rule(Group),
	wire.CmdGroupStatus:     rule(Group),
	wire.CmdListGroups:      rule(Group),
	wire.CmdCommitOffset:    rule(Group),
	wire.CmdBatchCommit:     rule(Group),
	wire.CmdFetchOffset:     rule(Group),

	// Transactions.
	wire.CmdInitProducerID:   rule(Transaction),
	wire.CmdBeginTxn:         rule(Transaction),
	wire.CmdEndTxn:           rule(Transaction),
	wire.CmdTxnStatus:        rule(Transaction),
	wire.CmdTxnPublish:       rule(Transaction, TopicWrite),
	wire.CmdTxnAppendStream:  rule(Transaction, TopicWrite),
	wire.CmdSendOffsetsToTxn: rule(Transaction, Group),
}

// findCoordinatorTxn is FIND_COORDINATOR for a transactional id.
var findCoordinatorTxn = rule(Transaction)

// RuleFor returns the rule of cmd for request r (FIND_COORDINATOR depends on
// its parameters); false for a command without a rule (internal commands,
// which the command table refuses before any rule is consulted).
func RuleFor(cmd wire.Command, r *wire.Request) (Rule, bool) {
	if cmd == wire.CmdFindCoordinator && r != nil && r.Value("transactional_id") != "" {
		return findCoordinatorTxn, true
	}
	ru, ok := rules[cmd]
	return ru, ok
}

// permitted checks the coarse permissions of the rule for p:
// NOT_AUTHORIZED_FOR_OPERATION naming the first missing one (for
// ReadOrWrite, topic.read when p holds neither).
func (r Rule) permitted(p Principal, cmd wire.Command) error {
	missing := func(q Permission) error {
		return errcode.NotAuthorizedForOperation.New("the principal lacks a permission this command needs",
			"command", cmd.String(), "permission", q.String())
	}
	if r.Topic == ReadOrWrite {
		if !p.Has(TopicRead) && !p.Has(TopicWrite) {
			return missing(TopicRead)
		}
		return nil
	}
	for _, q := range r.Perms {
		if !p.Has(q) {
			return missing(q)
		}
	}
	return nil
}
