package wire

import (
	"strconv"
	"strings"
)

// Command is Strata's own identifier of a Wire v2 command. Its values are
// deliberately unrelated to any wire numbering (they follow the names
// alphabetically): the published SDKs disagree on the numbers (WIRE-V2
// section 5), so a numeric id means something only together with the
// connection's CommandTable. Never convert between Command and a wire id with
// a type conversion; use CommandTable.ByID and CommandTable.ID.
type Command uint8

// Commands, alphabetically. CmdUnknown (0) is never a valid command.
const (
	CmdUnknown Command = iota
	CmdAbortTxn
	CmdAggregateEventRangeRead
	CmdAggregateReplayProof
	CmdAlterTopicConfig
	CmdAppendStream
	CmdAuth
	CmdBatchCommit
	CmdBeginTxn
	CmdBrowseMessages
	CmdCatchupSnapshots
	CmdClusterStatus
	CmdCommitOffset
	CmdConsume
	CmdCreate
	CmdDelete
	CmdDeleteGroup
	CmdDescribe
	CmdElectLeader
	CmdEndTxn
	CmdExit
	CmdFetchOffset
	CmdFetchSnapshot
	CmdFindCoordinator
	CmdGroupStatus
	CmdHeartbeat
	CmdHeartbeatCluster
	CmdHelp
	CmdInitProducerID
	CmdInternalBatch
	CmdJoinCluster
	CmdJoinGroup
	CmdLeaveCluster
	CmdLeaveGroup
	CmdList
	CmdListCluster
	CmdListGroups
	CmdListOffsets
	CmdListSnapshots
	CmdListTxns
	CmdMetadata
	CmdNegotiate
	CmdPublish
	CmdRaftApply
	CmdReadSnapshot
	CmdReadStream
	CmdReadStreamHistory
	CmdRegisterGroup
	CmdReplicaCatchup
	CmdReplicateMessage
	CmdReplicateSnapshot
	CmdResetOffsets
	CmdSaveSnapshot
	CmdSendOffsetsToTxn
	CmdStream
	CmdStreamVersion
	CmdSyncGroup
	CmdTruncate
	CmdTxnAppendStream
	CmdTxnPublish
	CmdTxnStatus

	numCommands = int(CmdTxnStatus)
)

// Reply says how a server answers a command (WIRE-V2 section 9.1).
type Reply uint8

// Reply shapes.
const (
	// ReplyOne: one response frame (kind 4), status OK or ERROR. PUBLISH with
	// acks 0 is the per-request exception: no frame at all.
	ReplyOne Reply = iota
	// ReplyTwoFrames: a JSON envelope frame, then a CBV2 batch frame (both
	// kind 4, status OK); an early error is one frame only.
	ReplyTwoFrames
	// ReplyStream: zero or more stream frames (kind 5) ending with a
	// STREAM_CONTROL close frame (status STREAM_END) or an ERROR.
	ReplyStream
	// ReplyNegotiation: a negotiation response frame (kind 2), only for
	// NEGOTIATE.
	ReplyNegotiation
)

var replyNames = [...]string{ReplyOne: "one", ReplyTwoFrames: "two_frames", ReplyStream: "stream", ReplyNegotiation: "negotiation"}

// String names the reply shape.
func (r Reply) String() string { return nameOf(replyNames[:], r, "reply") }

// CommandInfo is the metadata a server needs about a command.
type CommandInfo struct {
	// Name is the spec name, upper case (PUBLISH).
	Name string
	// Internal marks broker-to-broker and cluster-listener commands that
	// clients must not send (REPLICATE_MESSAGE, RAFT_APPLY, JOIN_CLUSTER, ...).
	Internal bool
	// Reply is how the command is answered.
	Reply Reply
	// Extension marks Strata's own commands, absent from every published
	// numbering: they take ids from FirstExtensionID up, the same id in
	// both tables, so no published id moves (docs/decisions.md).
	Extension bool
}

// FirstExtensionID is the lowest wire id of an extension command. Published
// ids stay below it (0-56 today), leaving the SDKs room to grow.
const FirstExtensionID = 1000

// commandRow is one line of the registry: the command, its metadata and its id
// in each published numbering (0 = absent from that table).
type commandRow struct {
	cmd  Command
	info CommandInfo
	a, b uint16
}

// commandRows is the single registry of every command (WIRE-V2 section 5,
// then Strata's extension commands).
// Column a is table A (Go conformance testdata 578ffe2 = Java 2568898, the
// canonical numbering); column b is table B (Python 26d7aa7: TXN_APPEND_STREAM
// at 29, later ids +1, no BROWSE_MESSAGES / READ_STREAM_HISTORY). Both columns
// are written out, not derived, so the conformance test checks real data.
var commandRows = [...]commandRow{
	{CmdAuth, CommandInfo{Name: "AUTH"}, 1, 1},
	{CmdCreate, CommandInfo{Name: "CREATE"}, 2, 2},
	{CmdAlterTopicConfig, CommandInfo{Name: "ALTER_TOPIC_CONFIG"}, 3, 3},
	{CmdDelete, CommandInfo{Name: "DELETE"}, 4, 4},
	{CmdTruncate, CommandInfo{Name: "TRUNCATE"}, 5, 5},
	{CmdList, CommandInfo{Name: "LIST"}, 6, 6},
	{CmdListCluster, CommandInfo{Name: "LIST_CLUSTER"}, 7, 7},
	{CmdClusterStatus, CommandInfo{Name: "CLUSTER_STATUS"}, 8, 8},
	{CmdElectLeader, CommandInfo{Name: "ELECT_LEADER"}, 9, 9},
	{CmdPublish, CommandInfo{Name: "PUBLISH"}, 10, 10},
	{CmdConsume, CommandInfo{Name: "CONSUME"}, 11, 11},
	{CmdStream, CommandInfo{Name: "STREAM", Reply: ReplyStream}, 12, 12},
	{CmdHelp, CommandInfo{Name: "HELP"}, 13, 13},
	{CmdHeartbeat, CommandInfo{Name: "HEARTBEAT"}, 14, 14},
	{CmdJoinGroup, CommandInfo{Name: "JOIN_GROUP"}, 15, 15},
	{CmdSyncGroup, CommandInfo{Name: "SYNC_GROUP"}, 16, 16},
	{CmdLeaveGroup, CommandInfo{Name: "LEAVE_GROUP"}, 17, 17},
	{CmdCommitOffset, CommandInfo{Name: "COMMIT_OFFSET"}, 18, 18},
	{CmdBatchCommit, CommandInfo{Name: "BATCH_COMMIT"}, 19, 19},
	{CmdRegisterGroup, CommandInfo{Name: "REGISTER_GROUP"}, 20, 20},
	{CmdGroupStatus, CommandInfo{Name: "GROUP_STATUS"}, 21, 21},
	{CmdFetchOffset, CommandInfo{Name: "FETCH_OFFSET"}, 22, 22},
	{CmdListGroups, CommandInfo{Name: "LIST_GROUPS"}, 23, 23},
	{CmdListOffsets, CommandInfo{Name: "LIST_OFFSETS"}, 24, 24},
	{CmdDescribe, CommandInfo{Name: "DESCRIBE"}, 25, 25},
	{CmdInitProducerID, CommandInfo{Name: "INIT_PRODUCER_ID"}, 26, 26},
	{CmdBeginTxn, CommandInfo{Name: "BEGIN_TXN"}, 27, 27},
	{CmdTxnPublish, CommandInfo{Name: "TXN_PUBLISH"}, 28, 28},
	{CmdSendOffsetsToTxn, CommandInfo{Name: "SEND_OFFSETS_TO_TXN"}, 29, 30},
	{CmdEndTxn, CommandInfo{Name: "END_TXN"}, 30, 31},
	{CmdTxnStatus, CommandInfo{Name: "TXN_STATUS"}, 31, 32},
	{CmdAppendStream, CommandInfo{Name: "APPEND_STREAM"}, 32, 33},
	{CmdReadStream, CommandInfo{Name: "READ_STREAM", Reply: ReplyTwoFrames}, 33, 34},
	{CmdSaveSnapshot, CommandInfo{Name: "SAVE_SNAPSHOT"}, 34, 35},
	{CmdReadSnapshot, CommandInfo{Name: "READ_SNAPSHOT"}, 35, 36},
	{CmdStreamVersion, CommandInfo{Name: "STREAM_VERSION"}, 36, 37},
	{CmdReplicateMessage, CommandInfo{Name: "REPLICATE_MESSAGE", Internal: true}, 37, 38},
	{CmdReplicateSnapshot, CommandInfo{Name: "REPLICATE_SNAPSHOT", Internal: true}, 38, 39},
	{CmdListSnapshots, CommandInfo{Name: "LIST_SNAPSHOTS", Internal: true}, 39, 40},
	{CmdFetchSnapshot, CommandInfo{Name: "FETCH_SNAPSHOT", Internal: true}, 40, 41},
	{CmdCatchupSnapshots, CommandInfo{Name: "CATCHUP_SNAPSHOTS", Internal: true}, 41, 42},
	{CmdFindCoordinator, CommandInfo{Name: "FIND_COORDINATOR"}, 42, 43},
	{CmdRaftApply, CommandInfo{Name: "RAFT_APPLY", Internal: true}, 43, 44},
	{CmdMetadata, CommandInfo{Name: "METADATA"}, 44, 45},
	{CmdInternalBatch, CommandInfo{Name: "INTERNAL_BATCH", Internal: true}, 45, 46},
	{CmdNegotiate, CommandInfo{Name: "NEGOTIATE", Reply: ReplyNegotiation}, 46, 47},
	{CmdExit, CommandInfo{Name: "EXIT"}, 47, 48},
	{CmdJoinCluster, CommandInfo{Name: "JOIN_CLUSTER", Internal: true}, 48, 49},
	{CmdLeaveCluster, CommandInfo{Name: "LEAVE_CLUSTER", Internal: true}, 49, 50},
	{CmdHeartbeatCluster, CommandInfo{Name: "HEARTBEAT_CLUSTER", Internal: true}, 50, 51},
	{CmdReplicaCatchup, CommandInfo{Name: "REPLICA_CATCHUP", Internal: true}, 51, 52},
	{CmdAggregateReplayProof, CommandInfo{Name: "AGGREGATE_REPLAY_PROOF"}, 52, 53},
	{CmdAggregateEventRangeRead, CommandInfo{Name: "AGGREGATE_EVENT_RANGE_READ"}, 53, 54},
	{CmdTxnAppendStream, CommandInfo{Name: "TXN_APPEND_STREAM"}, 54, 29},
	{CmdBrowseMessages, CommandInfo{Name: "BROWSE_MESSAGES", Reply: ReplyTwoFrames}, 55, 0},
	{CmdReadStreamHistory, CommandInfo{Name: "READ_STREAM_HISTORY", Reply: ReplyTwoFrames}, 56, 0},
	// Strata extension commands (admin): the same id in both tables.
	{CmdDeleteGroup, CommandInfo{Name: "DELETE_GROUP", Extension: true}, 1000, 1000},
	{CmdResetOffsets, CommandInfo{Name: "RESET_OFFSETS", Extension: true}, 1001, 1001},
	{CmdListTxns, CommandInfo{Name: "LIST_TXNS", Extension: true}, 1002, 1002},
	{CmdAbortTxn, CommandInfo{Name: "ABORT_TXN", Extension: true}, 1003, 1003},
}

var (
	commandInfos  [numCommands + 1]CommandInfo
	commandByName = make(map[string]Command, numCommands)

	// TableA is the canonical numbering (newest Go and Java SDKs): NEGOTIATE
	// is 46, TXN_APPEND_STREAM 54, BROWSE_MESSAGES 55, READ_STREAM_HISTORY 56;
	// plus Strata's extension commands (DELETE_GROUP 1000, RESET_OFFSETS 1001,
	// LIST_TXNS 1002, ABORT_TXN 1003).
	TableA = &CommandTable{name: "A"}
	// TableB is the numbering of the newest Python SDK: TXN_APPEND_STREAM at
	// 29, every later command one higher than in TableA (NEGOTIATE 47), and
	// no BROWSE_MESSAGES or READ_STREAM_HISTORY; the extension commands keep
	// their table A ids.
	TableB = &CommandTable{name: "B"}
)

func init() {
	for _, r := range commandRows {
		if commandInfos[r.cmd].Name != "" {
			panic("wire: command listed twice: " + r.info.Name)
		}
		for _, id := range []uint16{r.a, r.b} {
			if id != 0 && (id >= FirstExtensionID) != r.info.Extension {
				panic("wire: id " + strconv.Itoa(int(id)) + " of " + r.info.Name + " is on the wrong side of FirstExtensionID")
			}
		}
		commandInfos[r.cmd] = r.info
		commandByName[r.info.Name] = r.cmd
		TableA.add(r.cmd, r.a)
		TableB.add(r.cmd, r.b)
	}
	for c := Command(1); int(c) <= numCommands; c++ {
		if commandInfos[c].Name == "" {
			panic("wire: command without a registry row: " + strconv.Itoa(int(c)))
		}
	}
}

// Valid reports whether c is a known command (not CmdUnknown).
func (c Command) Valid() bool { return c > CmdUnknown && int(c) <= numCommands }

// Info returns the command's metadata; the zero CommandInfo for an invalid c.
func (c Command) Info() CommandInfo {
	if !c.Valid() {
		return CommandInfo{}
	}
	return commandInfos[c]
}

// String returns the spec name (PUBLISH), or UNKNOWN.
func (c Command) String() string {
	if !c.Valid() {
		return "UNKNOWN"
	}
	return commandInfos[c].Name
}

// IsInternal reports whether c is a broker-to-broker command clients must not
// send.
func (c Command) IsInternal() bool { return c.Info().Internal }

// Reply returns how c is answered.
func (c Command) Reply() Reply { return c.Info().Reply }

// IsExtension reports whether c is a Strata extension command (not part of
// published Wire v2).
func (c Command) IsExtension() bool { return c.Info().Extension }

// CommandByName maps a command name to its Command, independent of any
// numbering. Names are matched case-insensitively after trimming surrounding
// whitespace; anything else in the string (HELP extra) makes it no name.
func CommandByName(name string) (Command, bool) {
	c, ok := commandByName[strings.ToUpper(strings.TrimSpace(name))]
	return c, ok
}

// CommandTable is one published numbering of the commands.
type CommandTable struct {
	name string
	ids  [numCommands + 1]uint16
	byID []Command
}

func (t *CommandTable) add(c Command, id uint16) {
	if id == 0 {
		return
	}
	for int(id) >= len(t.byID) {
		t.byID = append(t.byID, CmdUnknown)
	}
	if t.byID[id] != CmdUnknown {
		panic("wire: table " + t.name + " assigns id " + strconv.Itoa(int(id)) + " twice")
	}
	t.byID[id] = c
	t.ids[c] = id
}

// Name returns "A" or "B".
func (t *CommandTable) Name() string { return t.name }

// ByID returns the command with wire id id. Id 0 and ids the table does not
// assign are unknown.
func (t *CommandTable) ByID(id uint16) (Command, bool) {
	if int(id) >= len(t.byID) {
		return CmdUnknown, false
	}
	c := t.byID[id]
	return c, c != CmdUnknown
}

// ID returns the wire id of c in this table; false when the table has no id
// for it (BROWSE_MESSAGES in TableB).
func (t *CommandTable) ID(c Command) (uint16, bool) {
	if !c.Valid() {
		return 0, false
	}
	id := t.ids[c]
	return id, id != 0
}

// ByName returns the command named name if this table numbers it. Matching
// is as in CommandByName.
func (t *CommandTable) ByName(name string) (Command, bool) {
	c, ok := CommandByName(name)
	if !ok || t.ids[c] == 0 {
		return CmdUnknown, false
	}
	return c, true
}

// Commands returns the table's commands in wire-id order, extension
// commands last.
func (t *CommandTable) Commands() []Command {
	out := make([]Command, 0, len(t.byID))
	for _, c := range t.byID {
		if c != CmdUnknown {
			out = append(out, c)
		}
	}
	return out
}

// NegotiateID returns the NEGOTIATE id of the table (46 in A, 47 in B).
func (t *CommandTable) NegotiateID() uint16 { return t.ids[CmdNegotiate] }

// TableForNegotiate selects a connection's numbering from the command id of
// its first frame, which must be a negotiation request: 46 selects TableA,
// 47 selects TableB (a Python 26d7aa7 client). Any other id selects nothing
// and the connection is refused. Ids 1-28 are the same in both tables.
func TableForNegotiate(id uint16) (*CommandTable, bool) {
	switch id {
	case TableA.NegotiateID():
		return TableA, true
	case TableB.NegotiateID():
		return TableB, true
	}
	return nil, false
}
