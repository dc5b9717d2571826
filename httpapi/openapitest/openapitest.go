// Package openapitest holds HTTP responses to the gateway's OpenAPI document
// (httpapi/openapi.json): Check fails a test unless the route and method are documented, the
// status is listed for the operation, the content type is one it lists, and a JSON body
// validates against the response schema. httpapi's handler tests and the end-to-end tests in
// the root package both check every response they read with it. Its own tests keep the
// document complete: a route registered in httpapi without documentation fails them.
package openapitest

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Base names the document as a schema resource, so `#/components/...` refs resolve inside it.
// It is never fetched.
const Base = "https://gateway.invalid/openapi.json"

// File is the path of httpapi/openapi.json, found from this source file so that any package's
// tests can read it whatever their working directory.
func File() string {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("httpapi", "openapi.json")
	}
	return filepath.Join(filepath.Dir(self), "..", "openapi.json")
}

// openapiMethods are the operation keys of an OpenAPI path item.
var openapiMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Spec is the compiled document: paths with their operations and response schemas.
type Spec struct {
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
	openapiSpec *Spec
	openapiErr  error
)

// Load reads and compiles httpapi/openapi.json once per test binary.
func Load() (*Spec, error) {
	openapiOnce.Do(func() {
		data, err := os.ReadFile(File())
		if err != nil {
			openapiErr = err
			return
		}
		openapiSpec, openapiErr = Compile(data)
	})
	return openapiSpec, openapiErr
}

// Check fails t unless the response is documented: the route and method exist in the
// document, the status is listed for the operation, the content type is one it lists, and a
// JSON body validates against the response schema. path may carry a query (it is ignored).
func Check(t testing.TB, method, path string, status int, contentType string, body []byte) {
	t.Helper()
	spec, err := Load()
	if err != nil {
		t.Errorf("openapi: %s: %v", File(), err)
		return
	}
	if err := spec.Check(method, path, status, contentType, body); err != nil {
		t.Errorf("openapi: %s %s -> %d: %v", method, path, status, err)
	}
}

// Compile parses an OpenAPI 3.1 document and compiles every response schema in it.
func Compile(data []byte) (*Spec, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the document is not a JSON object")
	}
	c := NewCompiler()
	if err := c.AddResource(Base, doc); err != nil {
		return nil, fmt.Errorf("add document: %w", err)
	}
	spec := &Spec{fallback: map[int]*oaResponse{}}
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

// NewCompiler is a JSON Schema 2020-12 compiler that asserts formats, as the document needs.
func NewCompiler() *jsonschema.Compiler {
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
		sch, err := c.Compile(Base + "#" + oaFragment(ptr+"/"+oaJoin("content", mt, "schema")))
		if err != nil {
			return nil, fmt.Errorf("schema of %s: %w", mt, err)
		}
		r.content[strings.ToLower(mt)] = sch
	}
	return r, nil
}

// Check is the package's Check without the testing.TB: nil when the response is documented.
func (s *Spec) Check(method, path string, status int, contentType string, body []byte) error {
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
	if !ok { // a range: image/*, */*
		if sch, ok = r.content[strings.ToLower(strings.Split(mt, "/")[0])+"/*"]; !ok {
			sch, ok = r.content["*/*"]
		}
	}
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
func (s *Spec) match(path string) *oaPath {
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

// Schema compiles the schema at a JSON pointer of the document, given as its tokens
// ("webhooks", "message.status", "post", ...).
func Schema(tokens ...string) (*jsonschema.Schema, error) {
	data, err := os.ReadFile(File())
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	c := NewCompiler()
	if err := c.AddResource(Base, doc); err != nil {
		return nil, err
	}
	return c.Compile(Base + "#" + oaFragment("/"+oaJoin(tokens...)))
}
