package whatsapp

// Process-wide settings of the libraries (libsignal, whatsmeow) and the slog adapters.

import (
	"context"
	"fmt"
	"log/slog"

	signalLog "go.mau.fi/libsignal/logger"
	"go.mau.fi/whatsmeow/store"
	waLog "go.mau.fi/whatsmeow/util/log"
)

// waLogger routes whatsmeow's printf-style logs to slog, with the whatsmeow module path
// (e.g. "whatsmeow/Client/Socket") as an attribute. Formatting is skipped for disabled levels:
// whatsmeow logs every frame at debug level.
type waLogger struct {
	log    *slog.Logger
	module string
}

var _ waLog.Logger = (*waLogger)(nil)

func newWALogger(log *slog.Logger, module string) waLog.Logger {
	return &waLogger{log: log, module: module}
}

func (w *waLogger) Errorf(msg string, args ...any) { w.emit(slog.LevelError, msg, args) }
func (w *waLogger) Warnf(msg string, args ...any)  { w.emit(slog.LevelWarn, msg, args) }
func (w *waLogger) Infof(msg string, args ...any)  { w.emit(slog.LevelInfo, msg, args) }
func (w *waLogger) Debugf(msg string, args ...any) { w.emit(slog.LevelDebug, msg, args) }

func (w *waLogger) Sub(module string) waLog.Logger {
	return &waLogger{log: w.log, module: w.module + "/" + module}
}

func (w *waLogger) emit(level slog.Level, msg string, args []any) {
	ctx := context.Background()
	if !w.log.Enabled(ctx, level) {
		return
	}
	w.log.Log(ctx, level, fmt.Sprintf(msg, args...), "module", w.module)
}

// RouteSignalLogs sends libsignal's logs (its errors go to stdout by default) to log. libsignal
// keeps its logger in a package variable that it also sets lazily, unsynchronised, on first
// use: call this once from main, before any Network is opened.
func RouteSignalLogs(log *slog.Logger) {
	var l signalLog.Loggable = signalLogger{log: log.With("module", "libsignal")}
	signalLog.Setup(&l)
}

// signalLogger adapts slog to libsignal's logger interface.
type signalLogger struct{ log *slog.Logger }

func (s signalLogger) Debug(caller, msg string)   { s.log.Debug(msg, "caller", caller) }
func (s signalLogger) Info(caller, msg string)    { s.log.Info(msg, "caller", caller) }
func (s signalLogger) Warning(caller, msg string) { s.log.Warn(msg, "caller", caller) }
func (s signalLogger) Error(caller, msg string)   { s.log.Error(msg, "caller", caller) }
func (s signalLogger) Configure(string)           {}

// SetDeviceName sets the name the phone lists this linked device under (whatsmeow's default
// is "whatsmeow"). whatsmeow keeps it in a package variable read at linking time: call this
// once from main, before any Network is opened.
func SetDeviceName(name string) {
	store.SetOSInfo(name, [3]uint32{1, 0, 0})
}
