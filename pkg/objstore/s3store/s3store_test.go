package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/objstore/objstoretest"
	"github.com/stratamq/strata/pkg/objstore/s3local"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// pageSize makes objstoretest's paging case span three LIST pages.
const pageSize = 10

func TestConformanceS3Mem(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return srv.Store(t, s3store.Options{ListPageSize: pageSize})
	})
}

func TestConformanceS3Bolt(t *testing.T) {
	srv := objstoretest.StartS3(t, filepath.Join(t.TempDir(), "s3.bolt"))
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return srv.Store(t, s3store.Options{ListPageSize: pageSize})
	})
}

// Without a prefix keys are the bucket's own; each case gets its own
// server so the bucket starts empty.
func TestConformanceS3NoPrefix(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		return objstoretest.StartS3(t, "").Store(t, s3store.Options{Prefix: "/", ListPageSize: pageSize})
	})
}

func TestPrefixLayout(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	a := srv.Store(t, s3store.Options{Prefix: "/strata/dev/"})
	root := srv.Store(t, s3store.Options{Prefix: "/"})
	if a.Prefix() != "strata/dev/" || root.Prefix() != "" || a.Bucket() != objstoretest.Bucket {
		t.Fatalf("prefixes %q %q, bucket %q", a.Prefix(), root.Prefix(), a.Bucket())
	}
	objstoretest.Put(t, a, "t/0/0-1.log", []byte("x"))
	objstoretest.WantBody(t, root, "strata/dev/t/0/0-1.log", []byte("x"))
	objstoretest.Put(t, root, "strata/devX", []byte("y")) // shares the string prefix, not the folder
	if got := objstoretest.List(t, a, ""); len(got) != 1 || got[0].Key != "t/0/0-1.log" {
		t.Fatalf("list under the prefix: %+v", got)
	}
}

// Objects in a bbolt file survive a restart of the server.
func TestBoltRestart(t *testing.T) {
	srv := objstoretest.StartS3(t, filepath.Join(t.TempDir(), "s3.bolt"))
	s := srv.Store(t, s3store.Options{})
	body := objstoretest.Body(7, 100_000)
	if err := objstore.PutIfAbsentIdempotent(objstoretest.Ctx(t), s, "t/0/00000000000000000000-1.log", body); err != nil {
		t.Fatal(err)
	}
	objstoretest.Put(t, s, "t/0/00000000000000000000-1.index", []byte("index"))
	for range 2 {
		srv.Restart(t)
		objstoretest.WantBody(t, s, "t/0/00000000000000000000-1.log", body)
		if got := objstoretest.List(t, s, "t/"); len(got) != 2 || got[1].Size != int64(len(body)) {
			t.Fatalf("after restart: %+v", got)
		}
		objstoretest.WantErr(t, s.Put(objstoretest.Ctx(t), "t/0/00000000000000000000-1.log", nil, objstore.PutOptions{IfAbsent: true}), objstore.ErrExists)
	}
	// A memory server forgets.
	mem := objstoretest.StartS3(t, "")
	m := mem.Store(t, s3store.Options{})
	objstoretest.Put(t, m, "k", []byte("v"))
	mem.Restart(t)
	_, err := m.Get(objstoretest.Ctx(t), "k", 0, -1)
	objstoretest.WantErr(t, err, objstore.ErrNotFound)
}

// List follows pages of ListPageSize keys: 25 keys take three requests.
func TestListPages(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{ListPageSize: pageSize})
	for i := range 25 {
		objstoretest.Put(t, s, fmt.Sprintf("k/%02d", i), nil)
	}
	srv.Faults.ResetCounts()
	if got := objstoretest.List(t, s, "k/"); len(got) != 25 || got[24].Key != "k/24" {
		t.Fatalf("listed %d keys", len(got))
	}
	if n := srv.Faults.Count("ListObjectsV2"); n != 3 {
		t.Fatalf("%d LIST requests for 25 keys in pages of 10, want 3", n)
	}
	srv.Faults.ResetCounts()
	objstoretest.List(t, srv.Store(t, s3store.Options{Prefix: s.Prefix()}), "k/")
	if n := srv.Faults.Count("ListObjectsV2"); n != 1 {
		t.Fatalf("%d LIST requests with the default page size, want 1", n)
	}
}

// 5xx and throttling answers are retried; the write lands once.
func TestRetriesServerErrors(t *testing.T) {
	for _, kind := range []s3local.Fault{s3local.Fault500, s3local.Fault503} {
		t.Run(fmt.Sprint(kind), func(t *testing.T) {
			srv := objstoretest.StartS3(t, "")
			s := srv.Store(t, s3store.Options{})
			srv.Faults.Fail("", 2, kind)
			if err := s.Put(objstoretest.Ctx(t), "k", []byte("v"), objstore.PutOptions{IfAbsent: true}); err != nil {
				t.Fatalf("put through 2 failures: %v", err)
			}
			if n, inj := srv.Faults.Count("PutObject"), srv.Faults.Injected(); n != 3 || inj != 2 {
				t.Fatalf("%d PutObject requests, %d injected; want 3 and 2", n, inj)
			}
			srv.Faults.Fail("GetObject", 2, kind)
			objstoretest.WantBody(t, s, "k", []byte("v"))
			srv.Faults.Fail("ListObjectsV2", 2, kind)
			if got := objstoretest.List(t, s, ""); len(got) != 1 {
				t.Fatalf("list: %+v", got)
			}
			srv.Faults.Fail("DeleteObject", 2, kind)
			if err := s.Delete(objstoretest.Ctx(t), "k"); err != nil {
				t.Fatal(err)
			}
			if inj := srv.Faults.Injected(); inj != 8 {
				t.Fatalf("%d injected, want 8", inj)
			}
		})
	}
}

// Retries are bounded: a store that keeps failing yields ErrUnavailable
// after Retries+1 attempts.
func TestRetriesBounded(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{Retries: 2})
	srv.Faults.Fail("", 100, s3local.Fault500)
	err := s.Put(objstoretest.Ctx(t), "k", []byte("v"), objstore.PutOptions{})
	objstoretest.WantErr(t, err, objstore.ErrUnavailable)
	if n := srv.Faults.Count("PutObject"); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	_, err = s.Get(objstoretest.Ctx(t), "k", 0, -1)
	objstoretest.WantErr(t, err, objstore.ErrUnavailable)
	if errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a failing server reads as a missing key: %v", err)
	}
	one := srv.Store(t, s3store.Options{Retries: -1})
	srv.Faults.ResetCounts()
	objstoretest.WantErr(t, one.Delete(objstoretest.Ctx(t), "k"), objstore.ErrUnavailable)
	if n := srv.Faults.Count("DeleteObject"); n != 1 {
		t.Fatalf("%d attempts with Retries -1, want 1", n)
	}
}

// A 409 ConditionalRequestConflict is retried; a 412 never is.
func TestConditionalConflictRetried(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{})
	c := objstoretest.Ctx(t)
	srv.Faults.ConflictConditionalPuts(2)
	objstoretest.Put(t, s, "plain", []byte("p")) // unconditional: not a conflict
	if inj := srv.Faults.Injected(); inj != 0 {
		t.Fatalf("an unconditional put got a conflict")
	}
	if err := s.Put(c, "k", []byte("v"), objstore.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("create through 2 conflicts: %v", err)
	}
	if n := srv.Faults.Count("PutObject"); n != 4 {
		t.Fatalf("%d PutObject requests, want 1 + 3", n)
	}
	srv.Faults.ResetCounts()
	objstoretest.WantErr(t, s.Put(c, "k", []byte("w"), objstore.PutOptions{IfAbsent: true}), objstore.ErrExists)
	if n := srv.Faults.Count("PutObject"); n != 1 {
		t.Fatalf("a 412 was retried: %d PutObject requests", n)
	}
	objstoretest.WantBody(t, s, "k", []byte("v"))
}

// A create whose answer is lost after it landed comes back as ErrExists
// from its own retry; PutIfAbsentIdempotent recognises its own object.
func TestCreateLandedAnswerLost(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{})
	c := objstoretest.Ctx(t)
	srv.Faults.Fail("PutObject", 1, s3local.FaultApplied500)
	err := s.Put(c, "a", []byte("mine"), objstore.PutOptions{IfAbsent: true})
	objstoretest.WantErr(t, err, objstore.ErrExists)
	if n := srv.Faults.Count("PutObject"); n != 2 {
		t.Fatalf("%d PutObject requests, want 2", n)
	}
	objstoretest.WantBody(t, s, "a", []byte("mine"))

	srv.Faults.Fail("PutObject", 1, s3local.FaultApplied500)
	if err := objstore.PutIfAbsentIdempotent(c, s, "b", []byte("mine")); err != nil {
		t.Fatalf("own create with a lost answer: %v", err)
	}
	objstoretest.WantBody(t, s, "b", []byte("mine"))
	// Someone else's object stays a conflict.
	objstoretest.WantErr(t, objstore.PutIfAbsentIdempotent(c, s, "b", []byte("theirs")), objstore.ErrExists)
}

// A slow server is waited for; the caller's deadline still bounds a call.
func TestLatency(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{})
	srv.Faults.Delay(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Put(ctx, "k", []byte("v"), objstore.PutOptions{IfAbsent: true}); err != nil {
		t.Fatalf("put with 2 s latency: %v", err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("put took %v, less than the injected latency", d)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err := s.Get(ctx, "k", 0, -1)
	objstoretest.WantErr(t, err, objstore.ErrUnavailable)
	objstoretest.WantErr(t, err, context.DeadlineExceeded)
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("get outlived its deadline: %v", d)
	}
	srv.Faults.Delay(0)
	objstoretest.WantBody(t, s, "k", []byte("v"))
}

// A short header timeout turns a hung server into retried timeouts.
func TestHeaderTimeout(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{HeaderTimeout: 100 * time.Millisecond, Retries: 2})
	srv.Faults.Delay(time.Second)
	start := time.Now()
	err := s.Put(objstoretest.Ctx(t), "k", []byte("v"), objstore.PutOptions{})
	objstoretest.WantErr(t, err, objstore.ErrUnavailable)
	if n := srv.Faults.Count("PutObject"); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Fatalf("took %v", d)
	}
}

// A share of failing requests is absorbed by retries.
func TestFailFraction(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{})
	srv.Faults.FailFraction("", 0.3, s3local.Fault503)
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		if err := objstore.PutIfAbsentIdempotent(objstoretest.Ctx(t), s, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
		objstoretest.WantBody(t, s, k, []byte(k))
	}
	if inj := srv.Faults.Injected(); inj == 0 {
		t.Fatal("nothing injected")
	}
	srv.Faults.FailFraction("", 0, 0)
	t.Logf("%d of %v failed", srv.Faults.Injected(), srv.Faults.Counts())
}

// Counting over s3store counts what the server sees, retries aside.
func TestCountingOverS3(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	c := objstore.NewCounting(srv.Store(t, s3store.Options{ListPageSize: pageSize}))
	srv.Faults.ResetCounts()
	for i := range 12 {
		objstoretest.Put(t, c, fmt.Sprintf("k/%02d", i), make([]byte, 1000))
	}
	objstoretest.Get(t, c, "k/00", 100, 200)
	objstoretest.List(t, c, "k/")
	if err := c.Delete(objstoretest.Ctx(t), "k/00"); err != nil {
		t.Fatal(err)
	}
	want := objstore.Counts{Puts: 12, Gets: 1, Lists: 1, Deletes: 1, PutBytes: 12000, GetBytes: 200, Listed: 12}
	if got := c.Counts(); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	f := srv.Faults
	if f.Count("PutObject") != 12 || f.Count("GetObject") != 1 || f.Count("ListObjectsV2") != 2 || f.Count("DeleteObject") != 1 {
		t.Fatalf("server saw %v", f.Counts())
	}
}

// A missing bucket is an error, never ErrNotFound.
func TestMissingBucket(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s, err := s3store.Open(context.Background(), s3store.Options{Endpoint: srv.URL(), Bucket: "no-such-bucket"})
	if err != nil {
		t.Fatal(err)
	}
	c := objstoretest.Ctx(t)
	_, err = s.Get(c, "k", 0, -1)
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get in a missing bucket: %v", err)
	}
	if err := s.Delete(c, "k"); err == nil {
		t.Fatal("delete in a missing bucket: no error")
	}
	if _, err := s.List(c, ""); err == nil {
		t.Fatal("list of a missing bucket: no error")
	}
}

// Bodies reach the server verbatim: no aws-chunked framing or trailing
// checksum (NOTES: gofakes3 would store those).
func TestBodyVerbatim(t *testing.T) {
	srv := objstoretest.StartS3(t, "")
	s := srv.Store(t, s3store.Options{Prefix: "/"})
	body := objstoretest.Body(9, 70_000)
	objstoretest.Put(t, s, "k", body)
	resp, err := http.Get(srv.URL() + "/" + objstoretest.Bucket + "/k")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), body) {
		t.Fatalf("server holds %d bytes, want %d verbatim", got.Len(), len(body))
	}
}

func TestOpenValidates(t *testing.T) {
	ctx := context.Background()
	for _, o := range []s3store.Options{
		{},
		{Bucket: "b", Endpoint: "127.0.0.1:9000"},
		{Bucket: "b", Endpoint: "http://127.0.0.1:1", ListPageSize: 1001},
		{Bucket: "b", Endpoint: "http://127.0.0.1:1", ListPageSize: -1},
		{Bucket: "b", Endpoint: "http://127.0.0.1:1", HeaderTimeout: -time.Second},
	} {
		if _, err := s3store.Open(ctx, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// With an endpoint override the client uses configured credentials when
// there are some and dummy ones otherwise, and never asks the instance
// metadata service.
func TestOpenCredentials(t *testing.T) {
	var imdsHits atomic.Int64
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		imdsHits.Add(1)
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(imds.Close)
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED"} {
		t.Setenv(k, "")
	}
	srv := objstoretest.StartS3(t, "")
	ctx := objstoretest.Ctx(t)
	creds := func(region string) (aws.Credentials, string) {
		t.Helper()
		client, err := s3store.NewClient(ctx, s3store.Options{Bucket: "b", Endpoint: srv.URL(), Region: region})
		if err != nil {
			t.Fatal(err)
		}
		o := client.Options()
		c, err := o.Credentials.Retrieve(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !o.UsePathStyle || o.RequestChecksumCalculation != aws.RequestChecksumCalculationWhenRequired ||
			o.ResponseChecksumValidation != aws.ResponseChecksumValidationWhenRequired || aws.ToString(o.BaseEndpoint) != srv.URL() {
			t.Fatalf("client options: path style %v, checksums %v/%v, endpoint %v",
				o.UsePathStyle, o.RequestChecksumCalculation, o.ResponseChecksumValidation, aws.ToString(o.BaseEndpoint))
		}
		// The client works against the stand-in with these credentials.
		if _, err := client.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
			t.Fatal(err)
		}
		return c, o.Region
	}
	c, region := creds("")
	if c.AccessKeyID != "strata" || region != s3store.DefaultRegion {
		t.Fatalf("no configured credentials: got %q in %q", c.AccessKeyID, region)
	}
	if n := imdsHits.Load(); n != 0 {
		t.Fatalf("the instance metadata service was asked %d times", n)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	if c, region := creds("eu-west-1"); c.AccessKeyID != "AKIDEXAMPLE" || region != "eu-west-1" {
		t.Fatalf("environment credentials: got %q in %q", c.AccessKeyID, region)
	}
}
