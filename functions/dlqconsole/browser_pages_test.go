package dlqconsole

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserPages opens every page of the console in headless Chromium
// against a real dev cluster, checks what it shows and writes a
// screenshot of each under $STRATA_ARTIFACTS (console-*.png): the
// brokers, the topics, a topic, its messages (an Avro value decoded
// through the registry, a value holding a script tag shown as text), the
// groups, a group's lag chart with at least two samples, the schemas, a
// subject and the dead letters.
func TestBrowserPages(t *testing.T) {
	bin := chromium(t)
	e := newViewEnv(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	defer cancel()

	dir := artifactDir(t)
	// open loads path, checks the selectors are visible, returns the text
	// of main and saves a screenshot.
	open := func(name, path string, visible ...string) string {
		t.Helper()
		acts := []chromedp.Action[chromedp.Void]{chromedp.Navigate(e.srv.URL + "/console" + path)}
		for _, sel := range append([]string{"main"}, visible...) {
			acts = append(acts, chromedp.WaitVisible(chromedp.CSS(sel)))
		}
		if err := chromedp.Do(ctx, acts...); err != nil {
			t.Fatalf("%s: open %s: %v", name, path, err)
		}
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		scripts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script").length`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			t.Fatalf("%s: screenshot: %v", name, err)
		}
		if scripts != 0 {
			t.Fatalf("%s: %d script elements on the page", name, scripts)
		}
		if !bytes.HasPrefix(shot, []byte("\x89PNG")) {
			t.Fatalf("%s: the screenshot is not a PNG", name)
		}
		p := filepath.Join(dir, "console-"+name+".png")
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
		return text
	}
	contains := func(name, text string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Fatalf("%s does not show %q:\n%s", name, w, text)
			}
		}
	}

	text := open("brokers", "/", "#broker-0")
	contains("brokers", text, "Cluster strata-dev", "controller", "ok (")

	text = open("topics", "/topics", "#topics")
	contains("topics", text, "shop", "orders.dlq", "payments")

	text = open("topic", "/topics/shop", "#partitions", "#configs")
	contains("topic", text, "retention.ms", "86400000", "Browse messages")

	text = open("messages", fmt.Sprintf("/topics/shop/messages?partition=0&offset=%d", e.avroAt),
		fmt.Sprintf("#msg-0-%d", e.avroAt), fmt.Sprintf("#msg-0-%d", e.scriptAt))
	contains("messages", text, `"item": "teapot"`, "schema 1 AVRO", "<script>alert('shop')</script>", "<i>test</i>")
	cell, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(fmt.Sprintf("#msg-0-%d td.value code", e.scriptAt))))
	if err != nil {
		t.Fatal(err)
	}
	if cell != "<script>alert('shop')</script>" {
		t.Fatalf("the script value is shown as %q, want the text itself", cell)
	}

	text = open("groups", "/groups", "#groups")
	contains("groups", text, "billing", "Empty")

	text = open("group", "/groups/billing", "#lag-chart svg", "#lag")
	contains("group", text, "shop", "sample(s) per partition")
	m := regexp.MustCompile(`(\d+) sample\(s\) per partition`).FindStringSubmatch(text)
	if n, _ := strconv.Atoi(m[1]); n < 2 {
		t.Fatalf("the lag chart has %d samples, want at least 2", n)
	}
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#lag-chart svg polyline.series").length`))
	if err != nil {
		t.Fatal(err)
	}
	if lines < 1 {
		t.Fatalf("the lag chart draws no line")
	}

	text = open("schemas", "/schemas", "#subjects")
	contains("schemas", text, "orders-value", "AVRO")
	text = open("subject", "/schemas/orders-value", "#version-1")
	contains("subject", text, `"name": "Order"`)

	text = open("dlq", "/dlq/", "main table")
	contains("dlq", text, "orders.dlq")

	text = open("error", "/topics/shop/messages?offset=x", "#error")
	contains("error", text, "invalid offset")
}
