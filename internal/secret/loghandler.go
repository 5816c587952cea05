package secret

import (
	"context"
	"fmt"
	"log/slog"
)

// LogHandler is a slog.Handler that removes the Redactor's values from
// every line before the handler beneath formats it: the message and each
// attribute, strings, errors, Stringers and other values alike (by their
// fmt form), in groups too. Attributes bound with WithAttrs are redacted
// with the values in force then. A line without a known value is passed on
// as it is, unchanged and without allocating.
type LogHandler struct {
	h slog.Handler
	r *Redactor
}

// NewLogHandler wraps h.
func NewLogHandler(h slog.Handler, r *Redactor) *LogHandler { return &LogHandler{h: h, r: r} }

// Enabled implements slog.Handler.
func (l *LogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (l *LogHandler) Handle(ctx context.Context, rec slog.Record) error {
	msg := l.r.Redact(rec.Message)
	changed := msg != rec.Message
	if !changed {
		rec.Attrs(func(a slog.Attr) bool {
			_, changed = l.attr(a)
			return !changed
		})
	}
	if !changed {
		return l.h.Handle(ctx, rec)
	}
	out := slog.NewRecord(rec.Time, rec.Level, msg, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		a, _ = l.attr(a)
		out.AddAttrs(a)
		return true
	})
	return l.h.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (l *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i], _ = l.attr(a)
	}
	return &LogHandler{h: l.h.WithAttrs(clean), r: l.r}
}

// WithGroup implements slog.Handler.
func (l *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{h: l.h.WithGroup(name), r: l.r}
}

// Hold and Release reach the hold of the handler beneath, when it has one
// (logsink.Handler: the access log writes a tick's lines at once through
// it); without one they do nothing.
func (l *LogHandler) Hold() {
	if h, ok := l.h.(interface{ Hold() }); ok {
		h.Hold()
	}
}

// Release ends a Hold; see Hold.
func (l *LogHandler) Release() error {
	if h, ok := l.h.(interface{ Release() error }); ok {
		return h.Release()
	}
	return nil
}

// attr returns a without the known values, and whether it changed.
func (l *LogHandler) attr(a slog.Attr) (slog.Attr, bool) {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		s := v.String()
		if r := l.r.Redact(s); r != s {
			return slog.String(a.Key, r), true
		}
	case slog.KindGroup:
		group := v.Group()
		var out []slog.Attr
		for i, g := range group {
			g2, ch := l.attr(g)
			if ch && out == nil {
				out = append(make([]slog.Attr, 0, len(group)), group[:i]...)
			}
			if out != nil {
				out = append(out, g2)
			}
		}
		if out != nil {
			return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}, true
		}
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case nil:
			return a, false
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		case []byte:
			s = string(x)
		default:
			s = fmt.Sprint(x)
		}
		if r := l.r.Redact(s); r != s {
			return slog.String(a.Key, r), true
		}
	}
	return a, false
}
