package webhook_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/actors/webhook"
)

// BenchmarkPost is the HTTP ceiling of deliveries on this machine: HTTPPoster posting to a
// fasthttp receiver on loopback, one request in flight per goroutine (a subscription has one).
func BenchmarkPost(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", par), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(204) }}
			go srv.Serve(ln)
			defer srv.Shutdown()
			p := webhook.NewHTTPPoster(nil, 0, 0)
			body := []byte(`{"type":"message.status","timestamp":"2026-01-01T00:00:00.000Z","data":{"messageId":"m1"}}`)
			url := "http://" + ln.Addr().String() + "/hook"
			h := webhook.Headers{ID: "msg_1", Timestamp: "1767225600", Signature: "v1,x"}
			b.SetParallelism(max(1, par/2)) // GOMAXPROCS 2 on the bench machine
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.Post(context.Background(), url, h, body); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "posts/s")
		})
	}
}
