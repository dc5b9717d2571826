//go:build ui

package uitest

// The Cloud API screen (DESIGN.md section 17): a number connected from the form, the webhook
// URL and verify token shown once (the verify token pastes into Meta's app settings: the fake
// Graph API's subscription check takes it), the token gone from the page; the templates with
// their status; the routing saved; a message's way (via the Cloud API number) on the Messages
// screen as it happens.

import (
	"strings"
	"testing"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/network/cloud/fakegraph"
)

const (
	cloudNumberID = "106540352242922"
	cloudWABA     = "102290129340398"
	cloudToken    = "EAAJB-dashboard-token"
	cloudSecret   = "dashboard-app-secret"
)

// newCloudFake starts a fake Graph API with one number and three templates.
func newCloudFake(t *testing.T) (*fakegraph.Server, *fakegraph.App) {
	fake := fakegraph.New()
	t.Cleanup(fake.Close)
	app := &fakegraph.App{Secret: cloudSecret}
	fake.AddNumber(fakegraph.Number{ID: cloudNumberID, WABA: cloudWABA, Display: "+1 555-078-3881", Name: "Lucky Shrub", Token: cloudToken, App: app})
	for _, tpl := range []cloudapi.MessageTemplate{
		{Name: "order_update", Language: "en_US", Status: "APPROVED", Category: "UTILITY", Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Order {{1}} is {{2}}."}}},
		{Name: "cold_notice", Language: "en_US", Status: "APPROVED", Category: "UTILITY", Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Lucky Shrub here: {{1}}"}}},
		{Name: "spring_sale_with_a_long_name_for_small_screens", Language: "en_US", Status: "PENDING", Category: "MARKETING", Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Everything 20 % off this weekend."}}},
	} {
		fake.AddTemplate(cloudWABA, tpl)
	}
	return fake, app
}

// connectCloud connects the fake's number for tok through the API and points the fake's app
// at this gateway.
func (g *gw) connectCloud(fake *fakegraph.Server, app *fakegraph.App, tok string) {
	g.t.Helper()
	r := g.call("POST", "/api/client/cloud/connect", tok, map[string]any{"phoneNumberId": cloudNumberID, "wabaId": cloudWABA, "accessToken": cloudToken, "appSecret": cloudSecret})
	hook := r["number"].(map[string]any)["webhookUrl"].(string)
	if err := fake.Subscribe(app, g.url+hook[strings.Index(hook, "/api/"):], r["verifyToken"].(string)); err != nil {
		g.t.Fatal(err)
	}
}

func TestCloudScreen(t *testing.T) {
	fake, app := newCloudFake(t)
	g := startGateway(t, "--cloud-graph-url", fake.URL())
	b := newBrowser(t)
	tok := g.token("fran", "client", 3600)
	g.link(tok, "4915112345600")

	b.open(g.url + "/dashboard/#token=" + tok)
	b.waitFor("the session screen", `document.querySelector('#session-status')`)
	b.go_("#/cloud")
	b.waitFor("the connect form", `document.querySelector('#cloud-connect')`)
	b.set("#cloud-phone-number-id", cloudNumberID)
	b.set("#cloud-waba-id", cloudWABA)
	b.set("#cloud-token", cloudToken)
	b.set("#cloud-secret", cloudSecret)
	b.click("#cloud-connect-button")
	b.waitFor("the verify token shown once", `document.querySelector('#secret-once') && document.querySelector('#cloud-webhook-once')`)
	verify := b.text("#secret-once")
	hook := b.text("#cloud-webhook-once")
	if !strings.HasPrefix(verify, "vt_") || !strings.HasPrefix(hook, "https://gw.example.com/api/cloud/webhook?session=") {
		t.Fatalf("shown once: %q, %q", verify, hook)
	}
	// What the page showed is what Meta's app settings take: the subscription check passes.
	if err := fake.Subscribe(app, g.url+hook[strings.Index(hook, "/api/"):], verify); err != nil {
		t.Fatal(err)
	}
	if html := b.html(); strings.Contains(html, cloudToken) || strings.Contains(html, cloudSecret) {
		t.Fatal("the token or the secret stayed in the page")
	}
	b.click("#secret-dismiss")
	b.waitFor("the verify token gone", `!document.querySelector('#secret-once')`)
	if strings.Contains(b.html(), verify) {
		t.Fatal("the verify token stayed in the page after it was dismissed")
	}
	b.waitFor("the number connected with its templates", `document.querySelector('#cloud-status[data-status=CONNECTED]') && document.querySelectorAll('tr[data-template]').length === 3`)
	if !strings.Contains(b.text(`tr[data-template="spring_sale_with_a_long_name_for_small_screens"]`), "Pending") {
		t.Fatalf("the pending template: %q", b.text(`tr[data-template="spring_sale_with_a_long_name_for_small_screens"]`))
	}

	// Routing: automatic, with the cold template (only approved ones taking a parameter).
	var options []string
	b.eval(`[...document.querySelectorAll('#routing-cold option')].map((o) => o.textContent)`, &options)
	if len(options) != 3 || !strings.HasPrefix(options[1], "order_update") && !strings.HasPrefix(options[2], "order_update") {
		t.Fatalf("cold template options %v", options)
	}
	b.set("#routing-mode", "auto")
	b.set("#routing-cold", "cold_notice\x00en_US")
	b.click("#routing-save")
	b.waitFor("the routing saved", `/Routing saved/.test(document.querySelector('.slot').textContent)`)
	if r := g.call("GET", "/api/client/routing", tok, nil); r["mode"] != "auto" || r["coldTemplate"].(map[string]any)["name"] != "cold_notice" {
		t.Fatalf("routing: %v", r)
	}

	// A message to a new customer goes as the cold template over the number: the Messages
	// screen says so, live.
	b.go_("#/messages")
	b.waitFor("the messages screen", `document.querySelector('#msg-list')`)
	id := g.call("POST", "/api/client/send", tok, map[string]any{"phone": "4915550009999", "text": "your order is confirmed"})["message_id"].(string)
	b.waitFor("the message's way", `document.querySelector('li.msg[data-id="`+id+`"] .via[data-via=cloud][data-reason=cold]')`)
	if got := fake.Sent("4915550009999"); len(got) != 1 || got[0].Request.Template == nil || got[0].Request.Template.Name != "cold_notice" {
		t.Fatalf("Meta got %+v", got)
	}
}
