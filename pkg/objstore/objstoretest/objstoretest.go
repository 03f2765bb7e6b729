// Package objstoretest is the conformance suite every objstore.Store
// implementation runs (Run), plus StartS3, which serves an S3 stand-in
// (s3local, with s3local.Faults in front) for a test and opens s3store
// stores on it. It imports testing and is used only from tests.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/objstore"
)

// NewStore returns a fresh, empty store for one test.
type NewStore func(t *testing.T) objstore.Store

// PagingKeys is how many keys the paging case lists: more than two pages
// of 10, so stores under test should list 10 keys per page (for s3store,
// Options.ListPageSize = 10) for the case to exercise paging.
const PagingKeys = 25

// Run runs every case against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"LargeBody", testLargeBody},
		{"BodiesAreCopied", testBodiesCopied},
		{"GetRange", testGetRange},
		{"GetEmptyObject", testGetEmptyObject},
		{"GetMissing", testGetMissing},
		{"Overwrite", testOverwrite},
		{"IfAbsent", testIfAbsent},
		{"IfAbsentRace16", testIfAbsentRace},
		{"PutIfAbsentIdempotent", testPutIfAbsentIdempotent},
		{"PutReaderStreams", testPutReader},
		{"ListPrefix", testListPrefix},
		{"ListPaging", testListPaging},
		{"ListPrefixes", testListPrefixes},
		{"DeleteIdempotent", testDelete},
		{"KeyCharacters", testKeyCharacters},
		{"InvalidArguments", testInvalid},
		{"CanceledContext", testCanceled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

// Ctx returns a context that ends with the test (or after 30 s).
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// WantErr fails the test unless errors.Is(err, target).
func WantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

// Put puts key unconditionally and fails the test on error.
func Put(t testing.TB, s objstore.Store, key string, body []byte) {
	t.Helper()
	if err := s.Put(Ctx(t), key, body, objstore.PutOptions{}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// Get reads length bytes of key from offset and fails the test on error.
func Get(t testing.TB, s objstore.Store, key string, offset, length int64) []byte {
	t.Helper()
	b, err := s.Get(Ctx(t), key, offset, length)
	if err != nil {
		t.Fatalf("get %s [%d+%d]: %v", key, offset, length, err)
	}
	return b
}

// WantBody fails the test unless key holds exactly want.
func WantBody(t testing.TB, s objstore.Store, key string, want []byte) {
	t.Helper()
	if got := Get(t, s, key, 0, -1); !bytes.Equal(got, want) {
		t.Fatalf("%s holds %s, want %s", key, show(got), show(want))
	}
}

// List lists prefix and fails the test on error.
func List(t testing.TB, s objstore.Store, prefix string) []objstore.ObjectInfo {
	t.Helper()
	objs, err := s.List(Ctx(t), prefix)
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return objs
}

// Body returns n pseudo-random bytes determined by seed.
func Body(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func show(b []byte) string {
	if len(b) <= 32 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%d bytes %q...", len(b), b[:16])
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	for _, tc := range []struct {
		key  string
		body []byte
	}{
		{"small", []byte("hello, strata")},
		{"empty", []byte{}},
		{"nil", nil},
		{"binary", Body(1, 4099)},
	} {
		Put(t, s, tc.key, tc.body)
		got := Get(t, s, tc.key, 0, -1)
		if !bytes.Equal(got, tc.body) {
			t.Fatalf("%s: got %s, want %s", tc.key, show(got), show(tc.body))
		}
	}
}

func testLargeBody(t *testing.T, s objstore.Store) {
	body := Body(2, 8<<20)
	if err := s.Put(Ctx(t), "large", body, objstore.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	WantBody(t, s, "large", body)
	if got := Get(t, s, "large", 5<<20+3, 1<<20); !bytes.Equal(got, body[5<<20+3:6<<20+3]) {
		t.Fatalf("range of the large body: %s", show(got))
	}
	objs := List(t, s, "large")
	if len(objs) != 1 || objs[0].Size != 8<<20 {
		t.Fatalf("list: %+v", objs)
	}
}

func testBodiesCopied(t *testing.T, s objstore.Store) {
	buf := []byte("original")
	Put(t, s, "k", buf)
	copy(buf, "XXXXXXXX")
	got := Get(t, s, "k", 0, -1)
	if string(got) != "original" {
		t.Fatalf("changing the put buffer changed the object: %q", got)
	}
	copy(got, "YYYYYYYY")
	WantBody(t, s, "k", []byte("original"))
}

func testGetRange(t *testing.T, s objstore.Store) {
	body := []byte("0123456789abcdef") // 16 bytes
	Put(t, s, "r", body)
	for _, tc := range []struct {
		name           string
		offset, length int64
		want           string
	}{
		{"whole", 0, -1, "0123456789abcdef"},
		{"middle", 3, 4, "3456"},
		{"first byte", 0, 1, "0"},
		{"last byte", 15, 1, "f"},
		{"to the end", 10, -1, "abcdef"},
		{"exactly to the end", 10, 6, "abcdef"},
		{"past the end", 12, 100, "cdef"},
		{"huge length", 12, 1 << 62, "cdef"},
		{"zero length", 5, 0, ""},
		{"offset == size", 16, -1, ""},
		{"offset == size, length", 16, 10, ""},
		{"offset == size, zero length", 16, 0, ""},
		{"offset past size", 40, 5, ""},
		{"offset past size to the end", 40, -1, ""},
	} {
		got := Get(t, s, "r", tc.offset, tc.length)
		if string(got) != tc.want {
			t.Errorf("%s [%d+%d]: got %q, want %q", tc.name, tc.offset, tc.length, got, tc.want)
		}
	}
}

func testGetEmptyObject(t *testing.T, s objstore.Store) {
	Put(t, s, "e", nil)
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {0, 0}, {3, -1}, {3, 1}} {
		if got := Get(t, s, "e", r[0], r[1]); len(got) != 0 {
			t.Errorf("empty object [%d+%d]: got %q", r[0], r[1], got)
		}
	}
}

func testGetMissing(t *testing.T, s objstore.Store) {
	c := Ctx(t)
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {5, -1}, {0, 0}, {7, 0}} {
		_, err := s.Get(c, "missing", r[0], r[1])
		WantErr(t, err, objstore.ErrNotFound)
	}
	// A neighbour does not make it exist.
	Put(t, s, "missing/child", []byte("x"))
	Put(t, s, "missingX", []byte("x"))
	_, err := s.Get(c, "missing", 0, -1)
	WantErr(t, err, objstore.ErrNotFound)
}

func testOverwrite(t *testing.T, s objstore.Store) {
	Put(t, s, "o", []byte("first, longer body"))
	Put(t, s, "o", []byte("second"))
	WantBody(t, s, "o", []byte("second"))
	objs := List(t, s, "o")
	if len(objs) != 1 || objs[0].Size != 6 {
		t.Fatalf("after overwrite: %+v", objs)
	}
}

func testIfAbsent(t *testing.T, s objstore.Store) {
	c := Ctx(t)
	if err := s.Put(c, "a", []byte("one"), objstore.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("first create: %v", err)
	}
	err := s.Put(c, "a", []byte("two"), objstore.PutOptions{IfAbsent: true})
	WantErr(t, err, objstore.ErrExists)
	if errors.Is(err, objstore.ErrNotFound) || errors.Is(err, objstore.ErrUnavailable) {
		t.Fatalf("create conflict also reads as another error: %v", err)
	}
	WantBody(t, s, "a", []byte("one"))
	// An empty object exists too.
	if err := s.Put(c, "empty", nil, objstore.PutOptions{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	WantErr(t, s.Put(c, "empty", []byte("x"), objstore.PutOptions{IfAbsent: true}), objstore.ErrExists)
	// After a delete the key can be created again.
	if err := s.Delete(c, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(c, "a", []byte("three"), objstore.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	WantBody(t, s, "a", []byte("three"))
}

func testIfAbsentRace(t *testing.T, s objstore.Store) {
	const n = 16
	c := Ctx(t)
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = s.Put(c, "race/seg", fmt.Appendf(nil, "writer %d", i), objstore.PutOptions{IfAbsent: true})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range results {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both created the key", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, objstore.ErrExists):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer created the key")
	}
	WantBody(t, s, "race/seg", fmt.Appendf(nil, "writer %d", winner))
}

func testPutIfAbsentIdempotent(t *testing.T, s objstore.Store) {
	c := Ctx(t)
	body := Body(3, 1000)
	if err := objstore.PutIfAbsentIdempotent(c, s, "seg", body); err != nil {
		t.Fatalf("first: %v", err)
	}
	if err := objstore.PutIfAbsentIdempotent(c, s, "seg", slices.Clone(body)); err != nil {
		t.Fatalf("same contents again: %v", err)
	}
	other := slices.Clone(body)
	other[999]++
	WantErr(t, objstore.PutIfAbsentIdempotent(c, s, "seg", other), objstore.ErrExists)
	WantErr(t, objstore.PutIfAbsentIdempotent(c, s, "seg", body[:999]), objstore.ErrExists)
	WantBody(t, s, "seg", body)
}

func testListPrefix(t *testing.T, s objstore.Store) {
	before := time.Now().Add(-time.Minute)
	keys := map[string]int{
		"t1/0/00000000000000000000-1.log":   10,
		"t1/0/00000000000000000100-1.log":   0,
		"t1/0/00000000000000000100-1.index": 3,
		"t1/0/00000000000000000050-1.log":   7,
		"t1/1/00000000000000000000-1.log":   5,
		"t1/0x":                             1,
		"t10/0/00000000000000000000-1.log":  2,
		"t2/0/00000000000000000000-1.log":   4,
	}
	for k, n := range keys {
		Put(t, s, k, Body(uint64(n), n))
	}
	want := []string{
		"t1/0/00000000000000000000-1.log",
		"t1/0/00000000000000000050-1.log",
		"t1/0/00000000000000000100-1.index",
		"t1/0/00000000000000000100-1.log",
	}
	objs := List(t, s, "t1/0/")
	if got := keysOf(objs); !slices.Equal(got, want) {
		t.Fatalf("list t1/0/: got %q, want %q", got, want)
	}
	for _, o := range objs {
		if o.Size != int64(keys[o.Key]) {
			t.Errorf("%s: size %d, want %d", o.Key, o.Size, keys[o.Key])
		}
		if o.LastModified.Before(before) || o.LastModified.After(time.Now().Add(time.Minute)) {
			t.Errorf("%s: last modified %v, not about now", o.Key, o.LastModified)
		}
	}
	// A prefix need not end at a '/'.
	if got := keysOf(List(t, s, "t1")); len(got) != 7 || got[0] != "t1/0/00000000000000000000-1.log" || got[6] != "t10/0/00000000000000000000-1.log" {
		t.Fatalf("list t1: %q", got)
	}
	if got := keysOf(List(t, s, "")); len(got) != len(keys) || !slices.IsSorted(got) {
		t.Fatalf("list everything: %q", got)
	}
	if got := List(t, s, "t3/"); len(got) != 0 {
		t.Fatalf("list of an empty prefix: %+v", got)
	}
}

func testListPaging(t *testing.T, s objstore.Store) {
	var want []string
	for i := range PagingKeys {
		k := fmt.Sprintf("p/%03d", (i*7)%PagingKeys) // out of order
		want = append(want, k)
		Put(t, s, k, []byte(k))
	}
	Put(t, s, "q/000", nil) // after the prefix
	Put(t, s, "o/000", nil) // before it
	slices.Sort(want)
	objs := List(t, s, "p/")
	if got := keysOf(objs); !slices.Equal(got, want) {
		t.Fatalf("paged list: got %d keys %q, want %d", len(got), got, len(want))
	}
	for _, o := range objs {
		if o.Size != int64(len(o.Key)) {
			t.Fatalf("%s: size %d", o.Key, o.Size)
		}
	}
}

func testListPrefixes(t *testing.T, s objstore.Store) {
	c := Ctx(t)
	for _, k := range []string{"a/1/x", "a/2/y", "a/2/z", "ab/1", "b/q", "c"} {
		Put(t, s, k, []byte(k))
	}
	for i := range PagingKeys {
		Put(t, s, fmt.Sprintf("p/%03d/x", (i*7)%PagingKeys), nil)
	}
	var paged []string
	for i := range PagingKeys {
		paged = append(paged, fmt.Sprintf("p/%03d/", i))
	}
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a/", "ab/", "b/", "p/"}},
		{"a/", []string{"a/1/", "a/2/"}},
		{"a", []string{"a/", "ab/"}},
		{"a/1/", []string{}},
		{"zz/", []string{}},
		{"p/", paged},
	} {
		got, err := objstore.ListPrefixes(c, s, tc.prefix)
		if err != nil {
			t.Fatalf("list prefixes of %q: %v", tc.prefix, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("list prefixes of %q: got %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	c := Ctx(t)
	Put(t, s, "d/1", []byte("x"))
	Put(t, s, "d/2", []byte("y"))
	for range 2 {
		if err := s.Delete(c, "d/1"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if err := s.Delete(c, "never-there"); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	_, err := s.Get(c, "d/1", 0, -1)
	WantErr(t, err, objstore.ErrNotFound)
	if got := keysOf(List(t, s, "d/")); !slices.Equal(got, []string{"d/2"}) {
		t.Fatalf("after delete: %q", got)
	}
}

func testKeyCharacters(t *testing.T, s objstore.Store) {
	keys := []string{
		"topic=orders/partition=3/00000000000000001234-7.log",
		"a-b_c.d~e/f-g",
		"deep/a/b/c/d/e/f/g/h",
		"with space/and+plus",
		"percent%2Fnot-a-slash",
		"unicode/über/日本",
		"colon:and,comma;semi@at!bang'quote(paren)*star$dollar&amp",
		"trailing/",
		"..",
		"x/../y",
		"./z",
	}
	for i, k := range keys {
		Put(t, s, k, fmt.Appendf(nil, "body %d", i))
	}
	for i, k := range keys {
		WantBody(t, s, k, fmt.Appendf(nil, "body %d", i))
	}
	want := slices.Sorted(slices.Values(keys))
	if got := keysOf(List(t, s, "")); !slices.Equal(got, want) {
		t.Fatalf("list: got %q, want %q", got, want)
	}
	if got := keysOf(List(t, s, "topic=orders/partition=3/")); len(got) != 1 || got[0] != keys[0] {
		t.Fatalf("list with '=' in the prefix: %q", got)
	}
	if got := keysOf(List(t, s, "with space/")); len(got) != 1 || got[0] != keys[3] {
		t.Fatalf("list with ' ' in the prefix: %q", got)
	}
	for _, k := range keys {
		if err := s.Delete(Ctx(t), k); err != nil {
			t.Fatalf("delete %q: %v", k, err)
		}
	}
	if got := List(t, s, ""); len(got) != 0 {
		t.Fatalf("after deleting all: %+v", got)
	}
}

func testInvalid(t *testing.T, s objstore.Store) {
	c := Ctx(t)
	for _, k := range []string{"", "bad\x00nul", "bad\nnewline", string([]byte{0xff, 0xfe}), strings.Repeat("k", objstore.MaxKeyBytes+1)} {
		if err := s.Put(c, k, []byte("x"), objstore.PutOptions{}); err == nil {
			t.Errorf("put %q: no error", k)
		}
		if _, err := s.Get(c, k, 0, -1); err == nil || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("get %q: %v, want a key error", k, err)
		}
		if err := s.Delete(c, k); err == nil {
			t.Errorf("delete %q: no error", k)
		}
	}
	Put(t, s, "k", []byte("x"))
	if _, err := s.Get(c, "k", -1, 1); err == nil {
		t.Error("negative offset: no error")
	}
	if got := List(t, s, ""); len(got) != 1 {
		t.Fatalf("invalid puts stored something: %+v", got)
	}
}

func testCanceled(t *testing.T, s objstore.Store) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(c, "c", []byte("x"), objstore.PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("put: %v, want context.Canceled", err)
	}
	if _, err := s.Get(c, "c", 0, -1); !errors.Is(err, context.Canceled) {
		t.Errorf("get: %v, want context.Canceled", err)
	}
	if _, err := s.List(c, ""); !errors.Is(err, context.Canceled) {
		t.Errorf("list: %v, want context.Canceled", err)
	}
	if err := s.Delete(c, "c"); !errors.Is(err, context.Canceled) {
		t.Errorf("delete: %v, want context.Canceled", err)
	}
	if got := List(t, s, ""); len(got) != 0 {
		t.Fatalf("a canceled put stored something: %+v", got)
	}
}

func keysOf(objs []objstore.ObjectInfo) []string {
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return keys
}

// onlySeeker hides io.ReaderAt, so implementations must seek and read.
type onlySeeker struct{ io.ReadSeeker }

func testPutReader(t *testing.T, s objstore.Store) {
	c := Ctx(t)
	body := Body(7, 3<<20+17)
	for name, r := range map[string]io.ReadSeeker{
		"reader-at":   bytes.NewReader(body),
		"seeker-only": onlySeeker{bytes.NewReader(body)},
	} {
		key := "stream/" + name
		if err := s.PutReader(c, key, r, int64(len(body)), objstore.PutOptions{IfAbsent: true}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		WantBody(t, s, key, body)
		WantErr(t, s.PutReader(c, key, bytes.NewReader(body), int64(len(body)), objstore.PutOptions{IfAbsent: true}), objstore.ErrExists)
		if err := objstore.PutReaderIfAbsentIdempotent(c, s, key, bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatalf("%s: the same body again: %v", name, err)
		}
		other := slices.Clone(body)
		other[len(other)-1]++
		WantErr(t, objstore.PutReaderIfAbsentIdempotent(c, s, key, bytes.NewReader(other), int64(len(other))), objstore.ErrExists)
		WantErr(t, objstore.PutReaderIfAbsentIdempotent(c, s, key, bytes.NewReader(body[:len(body)-1]), int64(len(body)-1)), objstore.ErrExists)
	}
	// A body that starts mid-reader: size bytes from the current position.
	r := bytes.NewReader(body)
	if _, err := r.Seek(1000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if err := s.PutReader(c, "stream/mid", r, 5000, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	WantBody(t, s, "stream/mid", body[1000:6000])
}
