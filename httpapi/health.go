package httpapi

import (
	_ "embed"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"
)

//go:embed openapi.json
var openapiDoc []byte

type healthJSON struct {
	Status  string            `json:"status"`
	Version string            `json:"version,omitempty"`
	Time    timestamp         `json:"timestamp"`
	Checks  map[string]string `json:"checks,omitempty"`
}

// ReadyCheck is one dependency /readyz reports: "ok", or the error's text. A failing
// Critical check makes /readyz answer 503 (storage: no new work can be accepted); a failing
// non-critical one is only reported (identity provider: API-key routes still work).
type ReadyCheck struct {
	Name     string
	Critical bool
	Check    func() error
}

func (s *Server) healthz(ctx *fasthttp.RequestCtx) error {
	writeJSON(ctx, fasthttp.StatusOK, healthJSON{Status: "ok", Version: s.cfg.Version, Time: timestamp(time.Now())})
	return nil
}

// readyz is 200 while the server accepts work, 503 before boot ends, once shutdown begins and
// while a critical dependency fails; the body names every dependency's state.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) error {
	ready := s.ready.Load()
	var checks map[string]string
	for _, c := range s.cfg.ReadyChecks {
		if checks == nil {
			checks = make(map[string]string, len(s.cfg.ReadyChecks))
		}
		checks[c.Name] = "ok"
		if err := c.Check(); err != nil {
			checks[c.Name] = err.Error()
			ready = ready && !c.Critical
		}
	}
	if !ready {
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, healthJSON{Status: "not_ready", Time: timestamp(time.Now()), Checks: checks})
		return nil
	}
	writeJSON(ctx, fasthttp.StatusOK, healthJSON{Status: "ready", Version: s.cfg.Version, Time: timestamp(time.Now()), Checks: checks})
	return nil
}

func (s *Server) metricsText(ctx *fasthttp.RequestCtx) error {
	families, err := s.cfg.Registry.Gather()
	if err != nil {
		return err
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	ctx.Response.Header.Set("Content-Type", string(format))
	enc := expfmt.NewEncoder(ctx, format)
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			s.reqLog(ctx).Error("metrics encode", "err", err)
			return nil
		}
	}
	return nil
}

func (s *Server) openapi(ctx *fasthttp.RequestCtx) error {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(openapiDoc)
	return nil
}
