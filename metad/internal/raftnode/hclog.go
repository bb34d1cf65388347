package raftnode

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends hashicorp/raft's hclog output to slog. Levels map
// Trace→Debug-4, Debug→Debug, Info→Info, Warn→Warn, Error→Error; names
// become a "logger" attribute; implied args become attributes.
type hclogAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level *atomic.Int32 // shared by derived loggers, like hclog's
}

// NewHCLogger returns an hclog.Logger writing to l at level and above.
func NewHCLogger(l *slog.Logger, name string, level hclog.Level) hclog.Logger {
	lv := &atomic.Int32{}
	lv.Store(int32(level))
	return &hclogAdapter{l: l, name: name, level: lv}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	return l >= hclog.Level(a.level.Load()) && a.l.Enabled(context.Background(), slogLevel(l))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !a.enabled(level) {
		return
	}
	attrs := make([]any, 0, len(a.args)+len(args)+2)
	if a.name != "" {
		attrs = append(attrs, "logger", a.name)
	}
	attrs = append(attrs, a.args...)
	attrs = append(attrs, normalise(args)...)
	a.l.Log(context.Background(), slogLevel(level), msg, attrs...)
}

// reservedKeys are attribute keys the process logger already carries (or
// slog writes itself): raft's own "node" and the like are renamed raft_<key>
// so that no record repeats a key.
var reservedKeys = map[string]bool{"time": true, "level": true, "msg": true, "role": true, "node": true,
	"raft_id": true, "logger": true, "component": true}

// normalise turns hclog's loose key/value lists into slog pairs: an odd
// trailing value gets the key "EXTRA_VALUE_AT_END" as hclog does, non-string
// keys are formatted, hclog.Fmt values are formatted (raft logs its
// configuration with hclog.Fmt("%+v", …)), and reserved keys are renamed.
func normalise(args []any) []any {
	out := make([]any, 0, len(args)+1)
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			out = append(out, "EXTRA_VALUE_AT_END", args[i])
			break
		}
		k, ok := args[i].(string)
		if !ok {
			k = fmt.Sprint(args[i])
		}
		if reservedKeys[k] {
			k = "raft_" + k
		}
		v := args[i+1]
		if f, ok := v.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				v = fmt.Sprintf(format, f[1:]...)
			}
		}
		out = append(out, k, v)
	}
	return out
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return append([]any(nil), a.args...) }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	n := *a
	n.args = append(append([]any(nil), a.args...), normalise(args)...)
	return &n
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	n := *a
	if n.name != "" {
		n.name += "." + name
	} else {
		n.name = name
	}
	return &n
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	n := *a
	n.name = name
	return &n
}

func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }

func (a *hclogAdapter) GetLevel() hclog.Level { return hclog.Level(a.level.Load()) }

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		msg := strings.TrimSpace(string(p))
		level := hclog.Info
		// raft's transports log through the standard logger with "[ERR]" /
		// "[WARN]" style prefixes.
		switch {
		case strings.HasPrefix(msg, "[ERR]"), strings.HasPrefix(msg, "[ERROR]"):
			level = hclog.Error
		case strings.HasPrefix(msg, "[WARN]"):
			level = hclog.Warn
		case strings.HasPrefix(msg, "[DEBUG]"):
			level = hclog.Debug
		}
		a.Log(level, msg)
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
