package clock

import (
	"context"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-ch:
		return t, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresAtItsDeadline(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(10 * time.Second)
	f.Advance(9 * time.Second)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("fired before its deadline")
	}
	f.Advance(time.Second)
	at, ok := fired(tm.C())
	if !ok || !at.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("fired=%v at %v, want at +10s", ok, at)
	}
	if f.Pending() != 0 {
		t.Fatalf("a fired timer is still pending")
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported it active")
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an active timer reported it inactive")
	}
	f.Advance(time.Hour)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	if tm.Reset(time.Minute) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	f.Advance(time.Minute)
	if _, ok := fired(tm.C()); !ok {
		t.Fatal("a reset timer did not fire")
	}
	tm.Reset(0)
	if _, ok := fired(tm.C()); !ok {
		t.Fatal("a timer reset to 0 did not fire at once")
	}
}

func TestFakeTickerTicksEveryPeriodAndDropsUnread(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(time.Second)
	f.Advance(time.Second)
	if at, ok := fired(tk.C()); !ok || !at.Equal(epoch.Add(time.Second)) {
		t.Fatalf("first tick %v %v", ok, at)
	}
	f.Advance(5 * time.Second) // five ticks, one buffered, four dropped
	if _, ok := fired(tk.C()); !ok {
		t.Fatal("no tick after 5 s")
	}
	if _, ok := fired(tk.C()); ok {
		t.Fatal("ticks were queued beyond one")
	}
	if f.Now() != epoch.Add(6*time.Second) {
		t.Fatalf("now %v", f.Now())
	}
	tk.Stop()
	f.Advance(time.Hour)
	if _, ok := fired(tk.C()); ok {
		t.Fatal("a stopped ticker ticked")
	}
}

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	late := f.NewTimer(3 * time.Second)
	early := f.NewTimer(time.Second)
	f.Advance(5 * time.Second)
	a, _ := fired(early.C())
	b, _ := fired(late.C())
	if !a.Before(b) {
		t.Fatalf("early fired at %v, late at %v", a, b)
	}
}

func TestWaitForPending(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan bool)
	go func() {
		done <- Sleep(context.Background(), f, time.Minute)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !f.WaitForPending(ctx, 1) {
		t.Fatal("the sleeper never registered its timer")
	}
	f.Advance(time.Minute)
	if !<-done {
		t.Fatal("Sleep reported it was cut short")
	}
	short, stop := context.WithTimeout(context.Background(), time.Millisecond)
	defer stop()
	if f.WaitForPending(short, 1) {
		t.Fatal("WaitForPending reported a timer that is not there")
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	f := NewFake(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, f, time.Hour) {
		t.Fatal("Sleep on a cancelled context reported success")
	}
}
