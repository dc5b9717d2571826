package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gateway/gateway"

// allowedImports is the allow-list of import arrows between the gateway's own packages
// (DESIGN.md section 1): main → node → httpapi → engine → actors → the network port; every
// adapter (persist, network/*, ecom, identity, media) imports only domain, never the core; node
// wires them. A package not listed may import no package of the gateway. Test-only packages are
// listed too, with what they may use.
var allowedImports = map[string][]string{
	// main reads the command line into a node.Config and runs the node; it builds no part of
	// the core (persist: the Badger size defaults of the flags; sim, simhttp, httpapi: `gateway
	// sim`; identity: `gateway token`).
	"": {"node", "domain", "httpapi", "identity", "persist", "network/sim", "network/simhttp"},
	// node is one gateway process, single or a cluster's node: it wires everything.
	"node":   {"*"},
	"domain": {},
	// httpapi names the cluster's forwarding envelope and its errors (a node passes a request
	// for another node's partition on as it is); main gives it the node.
	"httpapi": {"domain", "engine", "identity", "media", "web", "internal/jsonenc", "internal/slowlog", "cluster", "cloudapi"},
	// The engine gets its storage as typed stores it declares (engine/records.go), built by main:
	// it does not import persist.
	"engine": {"domain", "actors/account", "actors/campaign", "actors/key", "actors/session", "actors/storeevents", "actors/webhook", "network", "ecom", "media", "cloudapi"},
	// One package per actor kind (actors itself is only their overview); none imports engine or
	// another actor's package.
	"actors":                  {},
	"actors/account":          {"domain", "actors/internal/mark"},
	"actors/internal/mark":    {}, // the durable-mark protocol of key and account
	"actors/campaign":         {"domain"},
	"actors/key":              {"domain", "actors/internal/mark"},
	"actors/session":          {"domain", "network", "internal/runq"},
	"actors/storeevents":      {"domain", "ecom"}, // ecom's stateless parsers and renderer
	"actors/webhook":          {"domain", "cloudapi"},
	"persist":                 {"domain", "internal/jsonenc", "internal/slowlog", "persist/outlog"},
	"persist/outlog":          {}, // the outbox's log (standard library only)
	"persist/kvtest":          {"domain", "persist"},
	"persist/natskv":          {"domain", "persist", "internal/jsstream"},
	"persist/natstest":        {},
	"network":                 {"domain"},
	"network/sim":             {"domain", "network", "internal/jsonenc", "internal/runq"},
	"network/whatsapp":        {"domain", "network"},
	"network/whatsapp/fakewa": {},
	// Meta's Cloud API on the wire (both directions: the cloud network, its fake, a
	// Cloud-API-shaped front); the cloud network; its fake Graph API (tests only).
	"cloudapi":                {"domain"},
	"network/cloud":           {"domain", "network", "cloudapi"},
	"network/cloud/fakegraph": {"cloudapi"},
	"network/networktest":     {"domain", "network"},
	"network/simhttp":         {"domain", "network", "network/sim"},
	"internal/pgtest":         {}, // test helper: throwaway PostgreSQL servers
	"internal/jsonenc":        {}, // the hand-written JSON of the hot paths
	"internal/slowlog":        {}, // what the slow-commit and slow-send reports share
	"internal/runq":           {}, // ready items run on kept goroutines (the sim's events, the sessions' sends)
	"internal/jsstream":       {}, // a JetStream stream with the replicas the deployment allows
	// The cluster's membership, leases and forwarding: an adapter over NATS (node wires it).
	"cluster":             {"domain"},
	"cluster/clustertest": {},
	// Events to NATS JetStream (--events-nats): the engine's EventForwarder, wired by main.
	"natsevents":          {"domain", "internal/jsstream"},
	"ecom":                {"domain"},
	"ecom/ecomtest":       {"domain", "ecom"},
	"identity":            {"domain"},
	"media":               {"domain"},
	"web":                 {},
	"httpapi/openapitest": {}, // test helper: the OpenAPI document, read from its file
	// bench mints dev ID tokens (identity) and, for the durable floor, makes the same Badger
	// group commit the gateway makes (persist). It is a tool beside the gateway, never
	// imported by it, so reaching into an adapter bends no arrow of the core.
	// With --store nats it also starts an embedded NATS server (persist/natstest) and makes the
	// floor's commits through the gateway's JetStream store (persist/natskv).
	"bench": {"domain", "identity", "persist", "persist/natskv", "persist/natstest"},
}

// goImports lists every package of the module with the module's packages it imports directly
// (go list -deps walks them all, test imports excluded).
func goImports(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pattern).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !inModule(f[0]) {
			continue
		}
		var own []string
		for _, imp := range f[1:] {
			if inModule(imp) {
				own = append(own, rel(imp))
			}
		}
		pkgs[rel(f[0])] = own
	}
	return pkgs
}

func inModule(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

// importedOnlyBy names the packages only some may import, whatever the allow-list says: the
// node is the process, which only the command runs.
var importedOnlyBy = map[string][]string{"node": {""}}

// badArrows lists the imports the allow-list does not permit.
func badArrows(pkgs map[string][]string) []string {
	return badArrowsOf(allowedImports, importedOnlyBy, pkgs)
}

func badArrowsOf(allowedImports, importedOnlyBy map[string][]string, pkgs map[string][]string) []string {
	var bad []string
	for pkg, imps := range pkgs {
		allowed, listed := allowedImports[pkg]
		for _, imp := range imps {
			by, only := importedOnlyBy[imp]
			if !listed || !(slices.Contains(allowed, "*") || slices.Contains(allowed, imp)) || (only && !slices.Contains(by, pkg)) {
				bad = append(bad, pkg+" → "+imp)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

func TestImportAllowList(t *testing.T) {
	if bad := badArrows(goImports(t, "./...")); len(bad) > 0 {
		t.Fatalf("imports outside the allow-list (DESIGN.md section 1):\n%s", strings.Join(bad, "\n"))
	}
}

// The check itself fails on the arrows it exists to stop: an adapter importing the core, and
// httpapi importing persist, network or actors, and an actor importing the engine or another actor.
func TestImportAllowListCatchesBadArrows(t *testing.T) {
	for _, arrow := range [][2]string{
		{"persist", "engine"}, {"network/sim", "actors"}, {"ecom", "httpapi"}, {"identity", "engine"},
		{"httpapi", "persist"}, {"httpapi", "network"}, {"httpapi", "actors"}, {"domain", "persist"},
		{"httpapi", "actors/session"}, {"actors/key", "engine"}, {"actors/campaign", "actors/session"},
		{"engine", "persist"}, {"actors/key", "persist"}, {"httpapi", "node"}, {"bench", "node"},
		{"", "engine"}, {"", "cluster"}, {"", "actors/session"}, {"", "persist/natskv"},
	} {
		if bad := badArrows(map[string][]string{arrow[0]: {arrow[1]}}); len(bad) != 1 {
			t.Errorf("%s → %s passed the allow-list", arrow[0], arrow[1])
		}
	}
}

// Only main imports node, even a package the allow-list lets import anything.
func TestOnlyMainImportsNode(t *testing.T) {
	allowed := map[string][]string{"": {"*"}, "tool": {"*"}}
	if bad := badArrowsOf(allowed, importedOnlyBy, map[string][]string{"tool": {"node"}}); len(bad) != 1 {
		t.Errorf("tool → node passed: %v", bad)
	}
	if bad := badArrowsOf(allowed, importedOnlyBy, map[string][]string{"": {"node"}}); len(bad) != 0 {
		t.Errorf("main → node refused: %v", bad)
	}
}
