package telemetry

import (
	"fmt"
	"log/slog"
)

// PrintfLogger routes the printf-style messages of an embedded engine that
// takes an Infof/Errorf/Fatalf logger (pebble's Logger) into slog, each with
// the attribute component=Component. Infof logs at debug level: such
// engines report routine work (flushes, compactions) there. Fatalf logs at
// error level with fatal=true and then panics, because the engine relies
// on Fatalf not returning.
type PrintfLogger struct {
	Logger    *slog.Logger
	Component string
}

// Infof logs at debug level.
func (p PrintfLogger) Infof(format string, args ...any) {
	p.Logger.Debug(fmt.Sprintf(format, args...), "component", p.Component)
}

// Errorf logs at error level.
func (p PrintfLogger) Errorf(format string, args ...any) {
	p.Logger.Error(fmt.Sprintf(format, args...), "component", p.Component)
}

// Fatalf logs at error level and panics with the message.
func (p PrintfLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.Logger.Error(msg, "component", p.Component, "fatal", true)
	panic(p.Component + ": " + msg)
}
