package main

// The OpenAPI document (httpapi/openapi.json) is the public API reference. checkOpenAPI holds
// every response the end-to-end tests read to it, and TestOpenAPIDocument keeps it complete:
// a route registered in httpapi without documentation fails the build's tests.

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/url"
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

const (
	openapiFile = "httpapi/openapi.json"
	// openapiBase names the document as a schema resource, so `#/components/...` refs resolve
	// inside it. It is never fetched.
	openapiBase = "https://gateway.invalid/openapi.json"
)

// openapiMethods are the operation keys of an OpenAPI path item.
var openapiMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// oaSpec is the compiled document: paths with their operations and response schemas.
type oaSpec struct {
	paths []*oaPath
	// fallback answers for a request the document has no operation for: the router's 404 on an
	// unknown path and 405 on a known path with another method (components/responses).
	fallback map[int]*oaResponse
}

type oaPath struct {
	template string
	segs     []string
	ops      map[string]*oaOperation // by upper-case method
}

type oaOperation struct {
	method, template string
	raw              map[string]any
	responses        map[string]*oaResponse // by status key: "200", "4XX", "default"
}

type oaResponse struct {
	ptr     string                        // JSON pointer of the (resolved) response object
	content map[string]*jsonschema.Schema // by media type; nil schema when none is given
}

var (
	openapiOnce sync.Once
	openapiSpec *oaSpec
	openapiErr  error
)

// loadOpenAPI reads and compiles httpapi/openapi.json once per test binary.
func loadOpenAPI() (*oaSpec, error) {
	openapiOnce.Do(func() {
		data, err := os.ReadFile(openapiFile)
		if err != nil {
			openapiErr = err
			return
		}
		openapiSpec, openapiErr = compileOpenAPI(data)
	})
	return openapiSpec, openapiErr
}

// checkOpenAPI fails t unless the response is documented: the route and method exist in the
// document, the status is listed for the operation, the content type is one it lists, and a
// JSON body validates against the response schema. path may carry a query (it is ignored).
func checkOpenAPI(t testing.TB, method, path string, status int, contentType string, body []byte) {
	t.Helper()
	spec, err := loadOpenAPI()
	if err != nil {
		t.Errorf("openapi: %s: %v", openapiFile, err)
		return
	}
	if err := spec.check(method, path, status, contentType, body); err != nil {
		t.Errorf("openapi: %s %s -> %d: %v", method, path, status, err)
	}
}

// compileOpenAPI parses an OpenAPI 3.1 document and compiles every response schema in it.
func compileOpenAPI(data []byte) (*oaSpec, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the document is not a JSON object")
	}
	c := newOpenAPICompiler()
	if err := c.AddResource(openapiBase, doc); err != nil {
		return nil, fmt.Errorf("add document: %w", err)
	}
	spec := &oaSpec{fallback: map[int]*oaResponse{}}
	paths, _ := doc["paths"].(map[string]any)
	templates := make([]string, 0, len(paths))
	for p := range paths {
		templates = append(templates, p)
	}
	sort.Strings(templates)
	for _, tmpl := range templates {
		item, ok := paths[tmpl].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("paths[%q] is not an object", tmpl)
		}
		p := &oaPath{template: tmpl, segs: strings.Split(tmpl, "/"), ops: map[string]*oaOperation{}}
		for _, m := range openapiMethods {
			raw, ok := item[m].(map[string]any)
			if !ok {
				continue
			}
			op := &oaOperation{method: strings.ToUpper(m), template: tmpl, raw: raw, responses: map[string]*oaResponse{}}
			responses, _ := raw["responses"].(map[string]any)
			for status := range responses {
				r, err := compileResponse(c, doc, "/"+oaJoin("paths", tmpl, m, "responses", status))
				if err != nil {
					return nil, fmt.Errorf("%s %s %s: %w", op.method, tmpl, status, err)
				}
				op.responses[status] = r
			}
			p.ops[op.method] = op
		}
		spec.paths = append(spec.paths, p)
	}
	for status, name := range map[int]string{404: "NotFound", 405: "MethodNotAllowed"} {
		ptr := "/" + oaJoin("components", "responses", name)
		if _, err := oaLookup(doc, ptr); err != nil {
			continue // undocumented: such answers fail like any other
		}
		r, err := compileResponse(c, doc, ptr)
		if err != nil {
			return nil, fmt.Errorf("components/responses/%s: %w", name, err)
		}
		spec.fallback[status] = r
	}
	return spec, nil
}

func newOpenAPICompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date-time, uuid: in 2020-12 formats only annotate unless asked
	return c
}

// compileResponse follows the response object's $ref (if any) and compiles each media type's
// schema where it stands in the document, so its own $refs resolve against the document.
func compileResponse(c *jsonschema.Compiler, doc any, ptr string) (*oaResponse, error) {
	obj, ptr, err := oaDeref(doc, ptr)
	if err != nil {
		return nil, err
	}
	r := &oaResponse{ptr: ptr, content: map[string]*jsonschema.Schema{}}
	content, _ := obj.(map[string]any)["content"].(map[string]any)
	for mt, m := range content {
		mtObj, _ := m.(map[string]any)
		if _, ok := mtObj["schema"]; !ok {
			r.content[strings.ToLower(mt)] = nil
			continue
		}
		sch, err := c.Compile(openapiBase + "#" + oaFragment(ptr+"/"+oaJoin("content", mt, "schema")))
		if err != nil {
			return nil, fmt.Errorf("schema of %s: %w", mt, err)
		}
		r.content[strings.ToLower(mt)] = sch
	}
	return r, nil
}

// check is checkOpenAPI without the testing.TB.
func (s *oaSpec) check(method, path string, status int, contentType string, body []byte) error {
	method = strings.ToUpper(method)
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	opMethod := method
	if method == "HEAD" {
		opMethod = "GET" // the router answers HEAD with the GET handler, without a body
	}
	p := s.match(path)
	var r *oaResponse
	switch {
	case p == nil && status == 404 && s.fallback[404] != nil:
		r = s.fallback[404]
	case p == nil:
		return fmt.Errorf("no documented path matches %q", path)
	case p.ops[opMethod] == nil && status == 405 && s.fallback[405] != nil:
		r = s.fallback[405]
	case p.ops[opMethod] == nil:
		return fmt.Errorf("%s is not documented for %s (documented: %s)", method, p.template, strings.Join(p.methods(), ", "))
	default:
		op := p.ops[opMethod]
		if r = op.response(status); r == nil {
			return fmt.Errorf("status %d is not documented for %s %s (documented: %s)", status, op.method, op.template, strings.Join(op.statuses(), ", "))
		}
	}
	if method == "HEAD" {
		return nil
	}
	if len(r.content) == 0 {
		if len(bytes.TrimSpace(body)) > 0 {
			return fmt.Errorf("a body is sent but %s documents none: %s", r.ptr, oaSnippet(body))
		}
		return nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("content type %q: %v", contentType, err)
	}
	sch, ok := r.content[strings.ToLower(mt)]
	if !ok {
		return fmt.Errorf("content type %q is not documented at %s (documented: %s)", mt, r.ptr, strings.Join(oaKeys(r.content), ", "))
	}
	if sch == nil || !oaIsJSON(mt) {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON (%v): %s", err, oaSnippet(body))
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("body does not match %s: %v\nbody: %s", r.ptr, err, oaSnippet(body))
	}
	return nil
}

// match finds the documented path for a request path; `{param}` segments match any non-empty
// segment, and the template with the most literal segments wins (/x/send over /x/{id}).
func (s *oaSpec) match(path string) *oaPath {
	segs := strings.Split(path, "/")
	var best *oaPath
	bestLit := -1
	for _, p := range s.paths {
		if len(p.segs) != len(segs) {
			continue
		}
		lit, ok := 0, true
		for i, ts := range p.segs {
			switch {
			case oaIsParam(ts):
				ok = segs[i] != ""
			case ts == segs[i]:
				lit++
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok && lit > bestLit {
			best, bestLit = p, lit
		}
	}
	return best
}

func (p *oaPath) methods() []string { return oaKeys(p.ops) }

func (op *oaOperation) statuses() []string { return oaKeys(op.responses) }

// response picks the documented response: exact status, then a range like 4XX, then default.
func (op *oaOperation) response(status int) *oaResponse {
	if r := op.responses[fmt.Sprint(status)]; r != nil {
		return r
	}
	if r := op.responses[fmt.Sprintf("%dXX", status/100)]; r != nil {
		return r
	}
	return op.responses["default"]
}

func oaIsParam(seg string) bool {
	return len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

func oaIsJSON(mt string) bool {
	mt = strings.ToLower(mt)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// oaJoin escapes tokens into a JSON pointer (without the leading slash).
func oaJoin(tokens ...string) string {
	esc := make([]string, len(tokens))
	for i, t := range tokens {
		esc[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
	}
	return strings.Join(esc, "/")
}

// oaFragment percent-encodes a JSON pointer for use as a URI fragment ({param} has braces).
func oaFragment(ptr string) string {
	parts := strings.Split(ptr, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// oaLookup resolves a JSON pointer ("" or "/a/b") in doc.
func oaLookup(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("pointer %q does not start with /", ptr)
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("%q: no member %q", ptr, tok)
			}
			cur = v
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(c) || fmt.Sprint(i) != tok {
				return nil, fmt.Errorf("%q: no index %q", ptr, tok)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%q: %q is inside a scalar", ptr, tok)
		}
	}
	return cur, nil
}

// oaRef resolves a local reference ("#/components/...") to its value and JSON pointer.
func oaRef(doc any, ref string) (any, string, error) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, "", fmt.Errorf("$ref %q is not local to the document", ref)
	}
	ptr, err := url.PathUnescape(frag)
	if err != nil {
		return nil, "", fmt.Errorf("$ref %q: %v", ref, err)
	}
	v, err := oaLookup(doc, ptr)
	return v, ptr, err
}

// oaDeref returns the object at ptr, following a chain of $ref (reference objects).
func oaDeref(doc any, ptr string) (any, string, error) {
	v, err := oaLookup(doc, ptr)
	for hops := 0; err == nil; hops++ {
		obj, ok := v.(map[string]any)
		ref, isRef := obj["$ref"].(string)
		if !ok || !isRef {
			return v, ptr, nil
		}
		if hops == 10 {
			return nil, "", fmt.Errorf("%s: $ref chain too long", ptr)
		}
		v, ptr, err = oaRef(doc, ref)
	}
	return nil, "", err
}

func oaKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func oaSnippet(b []byte) string {
	const limit = 600
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}

// routeCallRE matches a route registration: s.route(GET, "/path", ... or with a
// fasthttp.MethodX constant or a string literal method.
var routeCallRE = regexp.MustCompile(`\bs\.route\(\s*((?:fasthttp\.Method)?[A-Za-z]+|"[A-Z]+")\s*,\s*"([^"]*)"`)

// registeredRoutes lists "METHOD /path" for every s.route call in httpapi's non-test sources,
// with fasthttp/router's {name:regex} and {name?} parameters in the OpenAPI {name} form.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("httpapi/*.go")
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
	data, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s does not parse: %v", openapiFile, err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is not a JSON object", openapiFile)
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
				t.Errorf("route %s is registered in httpapi but not documented in %s", r, openapiFile)
			}
			delete(documented, r)
		}
		for _, r := range oaKeys(documented) {
			t.Errorf("%s documents %s, which httpapi does not register", openapiFile, r)
		}
	})

	// The rest needs every response schema compiled.
	spec, err := loadOpenAPI()
	if err != nil {
		t.Fatalf("compile: %v", err)
	}

	t.Run("component schemas compile", func(t *testing.T) {
		c := newOpenAPICompiler()
		if err := c.AddResource(openapiBase, doc); err != nil {
			t.Fatal(err)
		}
		schemas, _ := oaGet(doc, "components", "schemas").(map[string]any)
		for _, name := range oaKeys(schemas) {
			if _, err := c.Compile(openapiBase + "#" + oaFragment("/"+oaJoin("components", "schemas", name))); err != nil {
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
			if strings.HasPrefix(st, "2") || !oaIsJSON(mt) || errorModelExceptions[name+" "+st] {
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
			checkOpenAPI(rec, c.method, c.path, c.status, c.ct, []byte(c.body))
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
	spec, err := compileOpenAPI([]byte(doc))
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
		err := spec.check("GET", c.path, c.status, "application/json", []byte(c.body))
		if (err == nil) != c.ok {
			t.Errorf("GET %s %d %s: err = %v, want ok = %v", c.path, c.status, c.body, err, c.ok)
		}
	}
}
