package raftnode

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapterMapsLevelsNamesAndArgs(t *testing.T) {
	var buf bytes.Buffer
	l := NewHCLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4})), "raft", hclog.Info)
	l.Debug("hidden by hclog level")
	l.Named("snapshots").With("peer", "n2").Warn("slow", "took", 5, "dangling")
	l.SetLevel(hclog.Trace)
	l.Trace("now visible", 7, "non-string key")
	l.StandardLogger(nil).Print("[ERR] transport broke")
	// raft's own "node" must not repeat the process logger's key, and
	// hclog.Fmt values are formatted, not printed as ["%+v", …].
	l.Info("initial configuration", "node", "raft-internal", "servers", hclog.Fmt("%+v", []string{"a", "b"}))
	out := buf.String()
	for _, want := range []string{
		"level=WARN msg=slow logger=raft.snapshots peer=n2 took=5 EXTRA_VALUE_AT_END=dangling",
		`level=DEBUG-4 msg="now visible" logger=raft 7="non-string key"`,
		`level=ERROR msg="[ERR] transport broke"`,
		`msg="initial configuration" logger=raft raft_node=raft-internal servers="[a b]"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("debug line logged below the hclog level:\n%s", out)
	}
	if !l.IsTrace() || l.GetLevel() != hclog.Trace || l.Named("x").Name() != "raft.x" || l.ResetNamed("y").Name() != "y" {
		t.Error("level or name accessors wrong")
	}
}
