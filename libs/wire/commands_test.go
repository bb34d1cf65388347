package wire

import (
	"strings"
	"testing"
)

func TestCommandRegistryCoversBothTables(t *testing.T) {
	// 56 published commands plus the 4 Strata extension commands; table B
	// lacks BROWSE_MESSAGES and READ_STREAM_HISTORY.
	if n := len(TableA.Commands()); n != 60 {
		t.Fatalf("table A has %d commands, want 60", n)
	}
	if n := len(TableB.Commands()); n != 58 {
		t.Fatalf("table B has %d commands, want 58", n)
	}
	for c := Command(1); int(c) <= numCommands; c++ {
		a, okA := TableA.ID(c)
		if !okA {
			t.Fatalf("%v missing from table A", c)
		}
		if back, ok := TableA.ByID(a); !ok || back != c {
			t.Fatalf("table A %d -> %v", a, back)
		}
		if b, ok := TableB.ID(c); ok {
			if back, _ := TableB.ByID(b); back != c {
				t.Fatalf("table B %d -> %v", b, back)
			}
			if a <= 28 && a != b {
				t.Fatalf("%v: ids 1-28 must agree (%d vs %d)", c, a, b)
			}
		}
		if byName, ok := CommandByName(c.String()); !ok || byName != c {
			t.Fatalf("name %s", c)
		}
	}
	// The enum is not a numbering: PUBLISH's Command value is not its id.
	if id, _ := TableA.ID(CmdPublish); uint16(CmdPublish) == id {
		t.Fatal("Command values must not coincide with table A ids")
	}
}

func TestCommandTablesDifferWhereThePublishedSDKsDo(t *testing.T) {
	cases := []struct {
		c    Command
		a, b uint16
	}{
		{CmdTxnPublish, 28, 28},
		{CmdTxnAppendStream, 54, 29},
		{CmdSendOffsetsToTxn, 29, 30},
		{CmdNegotiate, 46, 47},
		{CmdExit, 47, 48},
		{CmdAggregateEventRangeRead, 53, 54},
	}
	for _, tc := range cases {
		if a, _ := TableA.ID(tc.c); a != tc.a {
			t.Errorf("%v table A id %d, want %d", tc.c, a, tc.a)
		}
		if b, _ := TableB.ID(tc.c); b != tc.b {
			t.Errorf("%v table B id %d, want %d", tc.c, b, tc.b)
		}
	}
	for _, c := range []Command{CmdBrowseMessages, CmdReadStreamHistory} {
		if _, ok := TableB.ID(c); ok {
			t.Errorf("%v must not have a table B id", c)
		}
		if _, ok := TableB.ByName(c.String()); ok {
			t.Errorf("table B ByName(%v) must fail", c)
		}
	}
	if _, ok := TableA.ByID(0); ok {
		t.Error("id 0 must be unknown")
	}
	if _, ok := TableA.ByID(57); ok {
		t.Error("id 57 must be unknown in table A")
	}
	if _, ok := TableB.ByID(55); ok {
		t.Error("id 55 must be unknown in table B")
	}
}

// The extension commands sit at the same ids in both tables, far above the
// published ones, which they leave untouched; the ids between are unknown.
func TestExtensionCommandsHaveTheSameIDInBothTables(t *testing.T) {
	for _, tc := range []struct {
		c    Command
		name string
		id   uint16
	}{
		{CmdDeleteGroup, "DELETE_GROUP", 1000},
		{CmdResetOffsets, "RESET_OFFSETS", 1001},
		{CmdListTxns, "LIST_TXNS", 1002},
		{CmdAbortTxn, "ABORT_TXN", 1003},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.c.String() != tc.name || !tc.c.IsExtension() || tc.c.IsInternal() || tc.c.Reply() != ReplyOne {
				t.Fatalf("%v: info %+v", tc.c, tc.c.Info())
			}
			for _, tb := range []*CommandTable{TableA, TableB} {
				if id, ok := tb.ID(tc.c); !ok || id != tc.id {
					t.Fatalf("table %s id %d %v, want %d", tb.Name(), id, ok, tc.id)
				}
				if c, ok := tb.ByID(tc.id); !ok || c != tc.c {
					t.Fatalf("table %s ByID(%d) = %v %v", tb.Name(), tc.id, c, ok)
				}
				if c, ok := tb.ByName(strings.ToLower(tc.name)); !ok || c != tc.c {
					t.Fatalf("table %s ByName = %v %v", tb.Name(), c, ok)
				}
			}
		})
	}
	for _, tb := range []*CommandTable{TableA, TableB} {
		for _, id := range []uint16{57, 100, 999, 1004, 65535} {
			if c, ok := tb.ByID(id); ok {
				t.Errorf("table %s: id %d must be unknown, is %v", tb.Name(), id, c)
			}
		}
		for _, c := range tb.Commands() {
			id, _ := tb.ID(c)
			if c.IsExtension() != (id >= FirstExtensionID) {
				t.Errorf("table %s: %v at id %d (extension %v)", tb.Name(), c, id, c.IsExtension())
			}
		}
	}
	// Every published id is where it was: the extensions moved nothing.
	if id, _ := TableA.ID(CmdReadStreamHistory); id != 56 {
		t.Errorf("READ_STREAM_HISTORY moved to %d", id)
	}
	if id, _ := TableB.ID(CmdAggregateEventRangeRead); id != 54 {
		t.Errorf("table B AGGREGATE_EVENT_RANGE_READ moved to %d", id)
	}
}

func TestCommandNamesAreCaseInsensitiveAfterTrim(t *testing.T) {
	for _, name := range []string{"publish", " Publish\t", "PUBLISH"} {
		if c, ok := TableA.ByName(name); !ok || c != CmdPublish {
			t.Errorf("ByName(%q) = %v %v", name, c, ok)
		}
	}
	for _, name := range []string{"HELP extra", "", "PUB LISH", "UNKNOWN", "PROTOCOL_INFO"} {
		if c, ok := CommandByName(name); ok {
			t.Errorf("CommandByName(%q) = %v, want no command", name, c)
		}
	}
}

func TestTableForNegotiateSelectsPerConnection(t *testing.T) {
	if tb, ok := TableForNegotiate(46); !ok || tb != TableA {
		t.Fatal("46 must select table A")
	}
	if tb, ok := TableForNegotiate(47); !ok || tb != TableB {
		t.Fatal("47 must select table B")
	}
	for _, id := range []uint16{0, 10, 45, 48} {
		if _, ok := TableForNegotiate(id); ok {
			t.Fatalf("%d must select no table", id)
		}
	}
}

func TestCommandMetadata(t *testing.T) {
	internal := map[Command]bool{
		CmdReplicateMessage: true, CmdReplicateSnapshot: true, CmdListSnapshots: true, CmdFetchSnapshot: true,
		CmdCatchupSnapshots: true, CmdRaftApply: true, CmdInternalBatch: true, CmdJoinCluster: true,
		CmdLeaveCluster: true, CmdHeartbeatCluster: true, CmdReplicaCatchup: true,
	}
	replies := map[Command]Reply{
		CmdReadStream: ReplyTwoFrames, CmdBrowseMessages: ReplyTwoFrames, CmdReadStreamHistory: ReplyTwoFrames,
		CmdStream: ReplyStream, CmdNegotiate: ReplyNegotiation,
	}
	for c := Command(1); int(c) <= numCommands; c++ {
		if c.IsInternal() != internal[c] {
			t.Errorf("%v internal = %v", c, c.IsInternal())
		}
		if c.Reply() != replies[c] {
			t.Errorf("%v reply = %v", c, c.Reply())
		}
	}
	if CmdUnknown.Valid() || CmdUnknown.String() != "UNKNOWN" || Command(200).Info() != (CommandInfo{}) {
		t.Error("invalid commands")
	}
}
