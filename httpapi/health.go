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
	Status  string    `json:"status"`
	Version string    `json:"version,omitempty"`
	Time    timestamp `json:"timestamp"`
}

func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, healthJSON{Status: "ok", Version: s.cfg.Version, Time: timestamp(time.Now())})
}

// readyz is 200 while the server accepts work, 503 before boot ends and once shutdown begins.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	if !s.ready.Load() {
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, healthJSON{Status: "not_ready", Time: timestamp(time.Now())})
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, healthJSON{Status: "ready", Version: s.cfg.Version, Time: timestamp(time.Now())})
}

func (s *Server) metricsText(ctx *fasthttp.RequestCtx) {
	families, err := s.cfg.Registry.Gather()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	ctx.Response.Header.Set("Content-Type", string(format))
	enc := expfmt.NewEncoder(ctx, format)
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			s.reqLog(ctx).Error("metrics encode", "err", err)
			return
		}
	}
}

func (s *Server) openapi(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(openapiDoc)
}
