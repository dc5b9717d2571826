package openapitest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// routeCallRE matches a route registration: s.route(GET, "/path", ... or with a
// fasthttp.MethodX constant or a string literal method.
var routeCallRE = regexp.MustCompile(`\bs\.route\(\s*((?:fasthttp\.Method)?[A-Za-z]+|"[A-Z]+")\s*,\s*"([^"]*)"`)

// registeredRoutes lists "METHOD /path" for every s.route call in httpapi's non-test sources,
// with fasthttp/router's {name:regex} and {name?} parameters in the OpenAPI {name} form.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(filepath.Dir(File()), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{([A-Za-z0-9_]+)(?::[^}]*)?\??\}`)
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		calls := regexp.MustCompile(`\bs\.route\(`).FindAllIndex(src, -1)
		found := routeCallRE.FindAllSubmatch(src, -1)
		if len(found) != len(calls) {
			// A call this test cannot read (a path in a variable, say) would go unchecked.
			t.Errorf("%s: %d s.route calls but only %d have a literal method and path", f, len(calls), len(found))
		}
		for _, m := range found {
			method := strings.Trim(string(m[1]), `"`)
			method = strings.ToUpper(strings.TrimPrefix(method, "fasthttp.Method"))
			out = append(out, method+" "+param.ReplaceAllString(string(m[2]), "{$1}"))
		}
	}
	sort.Strings(out)
	return out
}

func TestOpenAPIDocument(t *testing.T) {
	data, err := os.ReadFile(File())
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s does not parse: %v", "httpapi/openapi.json", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not a JSON object", "httpapi/openapi.json")
	}
	if ver, _ := doc["openapi"].(string); !strings.HasPrefix(ver, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", ver)
	}
	if d, ok := doc["jsonSchemaDialect"]; ok && d != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("jsonSchemaDialect = %v, want JSON Schema 2020-12", d)
	}
	info, _ := doc["info"].(map[string]any)
	if s, _ := info["title"].(string); s == "" {
		t.Error("info.title is missing")
	}
	if s, _ := info["version"].(string); s == "" {
		t.Error("info.version is missing")
	}

	t.Run("refs resolve", func(t *testing.T) {
		n := 0
		oaWalk(doc, "", func(ptr string, obj map[string]any) {
			ref, ok := obj["$ref"].(string)
			if !ok {
				return
			}
			n++
			if _, _, err := oaRef(doc, ref); err != nil {
				t.Errorf("%s: %v", ptr, err)
			}
		})
		if n == 0 {
			t.Error("no $ref at all: schemas should be shared through components")
		}
	})

	t.Run("every route is documented", func(t *testing.T) {
		routes := registeredRoutes(t)
		if !slices.Contains(routes, "GET /healthz") {
			t.Fatalf("parsed routes %v lack GET /healthz: is the route regexp stale?", routes)
		}
		documented := map[string]bool{}
		paths, _ := doc["paths"].(map[string]any)
		for tmpl, item := range paths {
			for _, m := range openapiMethods {
				if _, ok := oaGet(item, m).(map[string]any); ok {
					documented[strings.ToUpper(m)+" "+tmpl] = true
				}
			}
		}
		for _, r := range routes {
			if !documented[r] {
				t.Errorf("route %s is registered in httpapi but not documented in %s", r, "httpapi/openapi.json")
			}
			delete(documented, r)
		}
		for _, r := range oaKeys(documented) {
			t.Errorf("%s documents %s, which httpapi does not register", "httpapi/openapi.json", r)
		}
	})

	// The rest needs every response schema compiled.
	spec, err := Load()
	if err != nil {
		t.Fatalf("compile: %v", err)
	}

	t.Run("component schemas compile", func(t *testing.T) {
		c := NewCompiler()
		if err := c.AddResource(Base, doc); err != nil {
			t.Fatal(err)
		}
		schemas, _ := oaGet(doc, "components", "schemas").(map[string]any)
		for _, name := range oaKeys(schemas) {
			if _, err := c.Compile(Base + "#" + oaFragment("/"+oaJoin("components", "schemas", name))); err != nil {
				t.Errorf("components/schemas/%s: %v", name, err)
			}
		}
	})

	schemes, _ := oaGet(doc, "components", "securitySchemes").(map[string]any)
	ids := map[string]string{}
	for _, p := range spec.paths {
		for _, m := range p.methods() {
			op := p.ops[m]
			name := m + " " + p.template
			t.Run(name, func(t *testing.T) { checkOperation(t, doc, p, op, schemes, ids) })
		}
	}
}

// errorModelExceptions are the non-2xx JSON responses SPEC.md gives their own shape.
var errorModelExceptions = map[string]bool{
	"POST /api/admin/apikeys/validate 401": true, // {valid: false, error}
	"GET /readyz 503":                      true, // the health body, status not_ready
}

func checkOperation(t *testing.T, doc map[string]any, p *oaPath, op *oaOperation, schemes map[string]any, ids map[string]string) {
	name := op.method + " " + p.template
	for _, field := range []string{"summary", "description", "operationId"} {
		if s, _ := op.raw[field].(string); strings.TrimSpace(s) == "" {
			t.Errorf("no %s", field)
		}
	}
	if id, _ := op.raw["operationId"].(string); id != "" {
		if other, dup := ids[id]; dup {
			t.Errorf("operationId %q is also used by %s", id, other)
		}
		ids[id] = name
	}
	if len(op.responses) == 0 {
		t.Fatal("no responses")
	}
	// A success is a 2xx, or a 3xx for a route that redirects (the OAuth callback).
	hasSuccess := false
	for _, st := range op.statuses() {
		hasSuccess = hasSuccess || strings.HasPrefix(st, "2") || strings.HasPrefix(st, "3")
	}
	if !hasSuccess {
		t.Error("no 2xx or 3xx response")
	}

	// Security: stated on every operation (there is no document-wide default), schemes exist.
	sec, ok := op.raw["security"].([]any)
	if !ok {
		t.Error("no security requirement: use [] for a public route")
	}
	for _, req := range sec {
		for s := range req.(map[string]any) {
			if _, ok := schemes[s]; !ok {
				t.Errorf("security scheme %q is not in components.securitySchemes", s)
			}
		}
	}
	if len(sec) > 0 && op.responses["401"] == nil {
		t.Error("an authenticated route must document 401")
	}
	if _, ok := op.raw["requestBody"]; ok {
		for _, st := range []string{"400", "413"} {
			if op.responses[st] == nil {
				t.Errorf("a route with a request body must document %s", st)
			}
		}
	}

	// Every {param} of the path is a required path parameter.
	params := map[string]bool{}
	for _, list := range []any{oaGet(doc, "paths", p.template, "parameters"), op.raw["parameters"]} {
		l, _ := list.([]any)
		for _, raw := range l {
			prm, _ := raw.(map[string]any)
			if ref, ok := prm["$ref"].(string); ok {
				v, _, err := oaRef(doc, ref)
				if err != nil {
					t.Error(err)
					continue
				}
				prm, _ = v.(map[string]any)
			}
			if prm["in"] == "path" && prm["required"] == true {
				params[fmt.Sprint(prm["name"])] = true
			}
		}
	}
	for _, seg := range p.segs {
		if oaIsParam(seg) && !params[seg[1:len(seg)-1]] {
			t.Errorf("path parameter %s is not declared as a required path parameter", seg)
		}
	}

	// Every response has a description; every example matches its schema; the non-2xx JSON
	// responses follow the error model and say which codes they carry by example.
	for _, st := range op.statuses() {
		r := op.responses[st]
		obj, _ := oaLookup(doc, r.ptr)
		if d, _ := obj.(map[string]any)["description"].(string); d == "" {
			t.Errorf("%s: no description", st)
		}
		for mt, sch := range r.content {
			ex := oaGet(obj, "content", mt, "example")
			hasEx := ex != nil
			if hasEx && sch != nil && oaIsJSON(mt) {
				if err := sch.Validate(ex); err != nil {
					t.Errorf("%s %s: the example does not match the schema: %v", st, mt, err)
				}
			}
			// The Cloud API front answers Meta's error shape (DESIGN.md section 20).
			if strings.HasPrefix(st, "2") || !oaIsJSON(mt) || errorModelExceptions[name+" "+st] || strings.Contains(name, " /cloud/") {
				continue
			}
			m, _ := ex.(map[string]any)
			if !hasEx || m["success"] != false || m["code"] == nil {
				t.Errorf("%s: an error response needs an example in the error model {success:false, error, code}", st)
			}
		}
	}
}

// oaWalk calls fn for every object in v with its JSON pointer.
func oaWalk(v any, ptr string, fn func(ptr string, obj map[string]any)) {
	switch c := v.(type) {
	case map[string]any:
		fn(ptr, c)
		for k, e := range c {
			oaWalk(e, ptr+"/"+oaJoin(k), fn)
		}
	case []any:
		for i, e := range c {
			oaWalk(e, fmt.Sprintf("%s/%d", ptr, i), fn)
		}
	}
}

// oaGet follows object members; nil when any is missing.
func oaGet(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// failRecorder is a testing.TB that records failures instead of failing the test, so the
// validator itself can be tested on bodies that must fail.
type failRecorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *failRecorder) Helper() {}
func (r *failRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}
func (r *failRecorder) Error(args ...any)                 { r.Errorf("%s", fmt.Sprint(args...)) }
func (r *failRecorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
func (r *failRecorder) Fatal(args ...any)                 { r.Error(args...) }
func (r *failRecorder) Fail()                             { r.Errorf("Fail") }
func (r *failRecorder) FailNow()                          { r.Errorf("FailNow") }
func (r *failRecorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

func TestOpenAPIValidatorCatchesDrift(t *testing.T) {
	const (
		js   = "application/json"
		id   = "3f2b8c4e-9a1d-4e6f-8b7a-2c5d9e0f1a3b"
		ts   = "2026-03-01T09:30:00.000Z"
		item = `"id":"` + id + `","clientName":"Alice","name":"k","maskedKey":"svc_live_***9f3a","status":"active","createdAt":"` + ts + `","expiresAt":null,"scopes":["send_text"],"rate_limit":1000,"plan":"free","api_calls":3`
		raw  = "svc_live_0c1f5e7a9b2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a9f3a"
		acct = `"keyId":"` + id + `","name":"k","userId":"alice","scopes":["send_text"],"plan":"free","rate_limit":1000,"reset":"` + ts + `","api_calls":3,"messagesSent":1,"monthly_limit":0,"remaining_month":null`
	)
	cases := []struct {
		name         string
		method, path string
		status       int
		ct, body     string
		ok           bool
	}{
		{"admin list", "GET", "/api/admin/apikeys", 200, js, `[{"userId":"alice",` + item + `}]`, true},
		{"admin list empty", "GET", "/api/admin/apikeys", 200, js, `[]`, true},
		{"admin list with rawKey", "GET", "/api/admin/apikeys", 200, js, `[{"userId":"alice","rawKey":"` + raw + `",` + item + `}]`, false},
		{"admin list without userId", "GET", "/api/admin/apikeys", 200, js, `[{` + item + `}]`, false},
		{"client list", "GET", "/api/client/apikeys", 200, js, `[{` + item + `}]`, true},
		{"client list with userId", "GET", "/api/client/apikeys", 200, js, `[{"userId":"alice",` + item + `}]`, false},
		{"client list with rawKey", "GET", "/api/client/apikeys", 200, js, `[{"rawKey":"` + raw + `",` + item + `}]`, false},
		{"expiresAt not a date-time", "GET", "/api/client/apikeys", 200, js, `[{` + strings.Replace(item, `"expiresAt":null`, `"expiresAt":"tomorrow"`, 1) + `}]`, false},
		{"expiresAt a timestamp", "GET", "/api/client/apikeys", 200, js, `[{` + strings.Replace(item, `"expiresAt":null`, `"expiresAt":"2026-12-31T00:00:00.000Z"`, 1) + `}]`, true},
		{"createdAt without milliseconds", "GET", "/api/client/apikeys", 200, js, `[{` + strings.Replace(item, ts, "2026-03-01T09:30:00Z", 1) + `}]`, false},
		{"unknown scope", "GET", "/api/client/apikeys", 200, js, `[{` + strings.Replace(item, "send_text", "send_fax", 1) + `}]`, false},
		{"create without rawKey", "POST", "/api/admin/apikeys", 201, js, `{"userId":"alice","id":"` + id + `","clientName":"A","name":"k","maskedKey":"svc_live_***9f3a","status":"active","createdAt":"` + ts + `","expiresAt":null,"scopes":["send_text"]}`, false},
		{"create answered 200", "POST", "/api/admin/apikeys", 200, js, `{"success":true}`, false},
		{"validate 401", "POST", "/api/admin/apikeys/validate", 401, js, `{"valid":false,"error":"Invalid API key"}`, true},
		{"validate 401 in error model", "POST", "/api/admin/apikeys/validate", 401, js, `{"success":false,"error":"Invalid API key","code":"invalid_api_key"}`, false},
		{"validate 200", "POST", "/api/admin/apikeys/validate", 200, js, `{"valid":true,"id":"` + id + `","name":"k","userId":"alice","clientName":"Alice","createdAt":"` + ts + `","expiresAt":null,"scopes":["send_text"]}`, true},
		{"validate 200 with error", "POST", "/api/admin/apikeys/validate", 200, js, `{"valid":true,"id":"` + id + `","name":"k","userId":"alice","createdAt":"` + ts + `","expiresAt":null,"scopes":["send_text"],"error":"x"}`, false},
		{"validate 400", "POST", "/api/admin/apikeys/validate", 400, js, `{"success":false,"error":"rawKey is required","code":"validation_failed"}`, true},
		{"account capped", "GET", "/api/v1/account", 200, js, `{` + acct + `,"remaining_today":5}`, true},
		{"account uncapped", "GET", "/api/v1/account", 200, js, `{` + acct + `,"remaining_today":null}`, true},
		{"account remaining as string", "GET", "/api/v1/account", 200, js, `{` + acct + `,"remaining_today":"5"}`, false},
		{"account without remaining", "GET", "/api/v1/account", 200, js, `{` + acct + `}`, false},
		{"account 401 key revoked", "GET", "/api/v1/account", 401, "application/json; charset=utf-8", `{"success":false,"error":"API key has been revoked","code":"key_revoked"}`, true},
		{"account 401 with an ID-token code", "GET", "/api/v1/account", 401, js, `{"success":false,"error":"x","code":"invalid_token"}`, false},
		{"error with success true", "PATCH", "/api/admin/apikeys", 404, js, `{"success":true,"error":"API key not found","code":"key_not_found"}`, false},
		{"delete 404 with a query", "DELETE", "/api/admin/apikeys?id=nope", 404, js, `{"success":false,"error":"API key not found: nope","code":"key_not_found"}`, true},
		{"user update", "PATCH", "/api/admin/users", 200, js, `{"success":true,"user":{"id":"carol","name":"","email":"","role":"admin","plan":"free","createdAt":"` + ts + `","updatedAt":"` + ts + `"}}`, true},
		{"user with unknown role", "GET", "/api/admin/users", 200, js, `[{"id":"carol","name":"","email":"","role":"root","plan":"free","createdAt":"` + ts + `","updatedAt":"` + ts + `"}]`, false},
		{"health", "GET", "/healthz", 200, js, `{"status":"ok","timestamp":"` + ts + `"}`, true},
		{"health as HTML", "GET", "/healthz", 200, "text/html", `<p>ok</p>`, false},
		{"health status not documented", "GET", "/healthz", 500, js, `{"success":false,"error":"internal error","code":"internal"}`, false},
		{"readyz 503", "GET", "/readyz", 503, js, `{"status":"not_ready","timestamp":"` + ts + `"}`, true},
		{"body not JSON", "GET", "/readyz", 200, js, `{"status":`, false},
		{"metrics", "GET", "/metrics", 200, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores", "# HELP x y\nx 1\n", true},
		{"unknown route 404", "GET", "/api/no/such/route", 404, js, `{"success":false,"error":"no such route","code":"not_found"}`, true},
		{"unknown route 404 other code", "GET", "/api/no/such/route", 404, js, `{"success":false,"error":"x","code":"key_not_found"}`, false},
		{"unknown route 200", "GET", "/api/no/such/route", 200, js, `{}`, false},
		{"wrong method 405", "PUT", "/api/admin/apikeys", 405, js, `{"success":false,"error":"method not allowed on this route","code":"method_not_allowed"}`, true},
		{"wrong method 200", "PUT", "/api/admin/apikeys", 200, js, `{"success":true}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &failRecorder{TB: t}
			Check(rec, c.method, c.path, c.status, c.ct, []byte(c.body))
			switch {
			case c.ok && rec.Failed():
				t.Errorf("a conforming response was refused: %s", strings.Join(rec.failures, "; "))
			case !c.ok && !rec.Failed():
				t.Errorf("a drifting response passed: %s %s -> %d %s", c.method, c.path, c.status, c.body)
			case !c.ok:
				t.Logf("refused as it should be: %s", strings.Join(rec.failures, "; "))
			}
		})
	}
}

// TestOpenAPIPathTemplates pins path matching on a small document: {param} segments, literal
// segments preferred over parameters, queries ignored, segment counts respected.
func TestOpenAPIPathTemplates(t *testing.T) {
	doc := `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{
		"/m/{id}":{"get":{"responses":{"200":{"description":"one","content":{"application/json":{"schema":{"const":"byid"}}}}}}},
		"/m/send":{"get":{"responses":{"200":{"description":"send","content":{"application/json":{"schema":{"const":"send"}}}}}}},
		"/m/{id}/x/{n}":{"get":{"responses":{"4XX":{"description":"range","content":{"application/json":{"schema":{"type":"object"}}}}}}}}}`
	spec, err := Compile([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, body string
		status     int
		ok         bool
	}{
		{"/m/abc", `"byid"`, 200, true},
		{"/m/abc?q=1", `"byid"`, 200, true},
		{"/m/send", `"send"`, 200, true},
		{"/m/send", `"byid"`, 200, false},
		{"/m/", `"byid"`, 200, false},
		{"/m/a/b", `"byid"`, 200, false},
		{"/m/a/x/7", `{}`, 404, true},
		{"/m/a/x/7", `{}`, 200, false},
		{"/m/a/x/7", `{}`, 500, false},
	}
	for _, c := range cases {
		err := spec.Check("GET", c.path, c.status, "application/json", []byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("GET %s %d %s: err = %v, want ok = %v", c.path, c.status, c.body, err, c.ok)
		}
	}
}
