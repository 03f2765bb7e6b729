package dlqconsole

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stratamq/strata/pkg/testenv"
)

// chromium finds a Chromium or Chrome binary; without one the test skips
// locally and fails when STRATA_REQUIRE_ALL is set (CI; testenv.Path).
func chromium(t *testing.T) string {
	t.Helper()
	return testenv.Path(t, testenv.Chromium)
}

func artifactDir(t *testing.T) string {
	if d := os.Getenv("STRATA_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}

// TestBrowserReplay opens the console in headless Chromium, sees the dead
// letter, selects it, clicks replay and sees it gone.
func TestBrowserReplay(t *testing.T) {
	bin := chromium(t)
	srv, c, s := newTestConsole(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	row := fmt.Sprintf("#letter-%d-%d", s.script.Partition, s.script.Offset)
	sel := fmt.Sprintf("#sel-%d-%d", s.script.Partition, s.script.Offset)
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return v
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/console/dlq/")); err != nil {
		t.Fatalf("chromedp: %v", err)
	}
	index := text("main")
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[href="/console/dlq/topics/orders.dlq"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatalf("chromedp: open the topic: %v", err)
	}
	before := text(row)
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(sel)),
		chromedp.Click(chromedp.CSS("#replay")),
		chromedp.WaitVisible(chromedp.CSS("#message")),
	); err != nil {
		t.Fatalf("chromedp: replay: %v", err)
	}
	msg, after := text("#message"), text("main")
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("chromedp: screenshot: %v", err)
	}
	if !bytes.HasPrefix(shot, []byte("\x89PNG")) {
		t.Fatalf("the screenshot is not a PNG")
	}
	path := filepath.Join(artifactDir(t), "dlqconsole-replay.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	if !strings.Contains(index, "orders.dlq") {
		t.Fatalf("index does not list orders.dlq:\n%s", index)
	}
	if !strings.Contains(before, "<script>alert(1)</script>") {
		t.Fatalf("the letter's value is not shown as text: %q", before)
	}
	if !strings.Contains(msg, "replayed 1 letter") {
		t.Fatalf("message after replay: %q", msg)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, row)))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 || strings.Contains(after, "alert(1)") {
		t.Fatalf("the replayed letter is still listed:\n%s", after)
	}
	if !strings.Contains(after, "already replayed once") {
		t.Fatalf("the other letters are gone too:\n%s", after)
	}
	recs := consumeOrigin(t, c, 1)
	if len(recs) != 1 || string(recs[0].Value) != "<script>alert(1)</script>" || recs[0].Partition != 0 {
		t.Fatalf("orders has %v, want the replayed letter on partition 0", recs)
	}
}
