package topic_test

import (
	"encoding/json"
	"errors"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

const catalogDir = "/meta/topics"

func openCatalog(t *testing.T, fs segment.FS) *topic.Catalog {
	t.Helper()
	c, err := topic.OpenCatalog(fs, catalogDir)
	require.NoError(t, err)
	return c
}

func newTopic(name string, partitions int32, configs map[string]string) topic.Topic {
	if configs == nil {
		configs = map[string]string{}
	}
	return topic.Topic{Name: name, ID: topic.NewID(), Partitions: partitions, ReplicationFactor: 1, Configs: configs}
}

func names(ts []topic.Topic) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func TestCatalogEmpty(t *testing.T) {
	fs := segment.NewMemFS()
	c := openCatalog(t, fs)
	require.Empty(t, c.List())
	_, ok := c.Get("x")
	require.False(t, ok)
	// Opening creates the directory but writes no file until a change.
	entries, err := fs.ReadDir(catalogDir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestCatalogCreateGetList(t *testing.T) {
	c := openCatalog(t, segment.NewMemFS())
	orders := newTopic("orders", 3, map[string]string{topic.RetentionMs: "1000"})
	require.NoError(t, c.Create(orders))
	require.NoError(t, c.Create(newTopic("alpha", 1, nil)))
	require.NoError(t, c.Create(newTopic("Zeta", 1, nil)))
	require.NoError(t, c.Create(newTopic("m-1", 1, nil)))

	got, ok := c.Get("orders")
	require.True(t, ok)
	require.Equal(t, orders, got)

	require.Equal(t, []string{"Zeta", "alpha", "m-1", "orders"}, names(c.List()))

	_, ok = c.Get("ORDERS")
	require.False(t, ok, "names are case-sensitive")
}

func TestCatalogReturnsCopies(t *testing.T) {
	c := openCatalog(t, segment.NewMemFS())
	cfg := map[string]string{topic.RetentionMs: "1000"}
	require.NoError(t, c.Create(newTopic("t", 1, cfg)))

	cfg[topic.RetentionMs] = "changed by caller after Create"
	got, _ := c.Get("t")
	require.Equal(t, "1000", got.Configs[topic.RetentionMs])

	got.Configs[topic.RetentionMs] = "changed through Get"
	got2, _ := c.Get("t")
	require.Equal(t, "1000", got2.Configs[topic.RetentionMs])

	c.List()[0].Configs[topic.RetentionMs] = "changed through List"
	got3, _ := c.Get("t")
	require.Equal(t, "1000", got3.Configs[topic.RetentionMs])
}

func TestCatalogCreateConflicts(t *testing.T) {
	tests := []struct {
		name     string
		existing []string
		create   string
		wantErr  error // nil: created
	}{
		{name: "same name", existing: []string{"orders"}, create: "orders", wantErr: topic.ErrExists},
		{name: "dot then underscore", existing: []string{"a.b"}, create: "a_b", wantErr: topic.ErrExists},
		{name: "underscore then dot", existing: []string{"a_b"}, create: "a.b", wantErr: topic.ErrExists},
		{name: "mixed separators", existing: []string{"x.y_z"}, create: "x_y.z", wantErr: topic.ErrExists},
		{name: "all dots vs all underscores", existing: []string{"a.b.c"}, create: "a_b_c", wantErr: topic.ErrExists},
		{name: "dash is distinct from dot", existing: []string{"a.b"}, create: "a-b"},
		{name: "dash is distinct from underscore", existing: []string{"a_b"}, create: "a-b"},
		{name: "case differs", existing: []string{"orders"}, create: "Orders"},
		{name: "prefix", existing: []string{"orders"}, create: "orders2"},
		{name: "extra dot", existing: []string{"a.b"}, create: "a..b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := segment.NewMemFS()
			c := openCatalog(t, fs)
			for _, n := range tt.existing {
				require.NoError(t, c.Create(newTopic(n, 1, nil)))
			}
			before := c.List()
			err := c.Create(newTopic(tt.create, 1, nil))
			if tt.wantErr == nil {
				require.NoError(t, err)
				_, ok := c.Get(tt.create)
				require.True(t, ok)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.Contains(t, err.Error(), tt.create)
			require.Equal(t, before, c.List())
			// Nothing changed on disk either.
			require.Equal(t, before, openCatalog(t, fs).List())
		})
	}
}

func TestCatalogUpdate(t *testing.T) {
	errFn := errors.New("fn refused")
	tests := []struct {
		name    string
		target  string
		fn      func(*topic.Topic) error
		wantErr error
		want    func(topic.Topic) topic.Topic // expected stored topic from the original
	}{
		{name: "add partitions", target: "t",
			fn:   func(tp *topic.Topic) error { tp.Partitions = 8; return nil },
			want: func(o topic.Topic) topic.Topic { o.Partitions = 8; return o }},
		{name: "set config", target: "t",
			fn: func(tp *topic.Topic) error { tp.Configs[topic.SegmentBytes] = "2048"; return nil },
			want: func(o topic.Topic) topic.Topic {
				o.Configs = map[string]string{topic.RetentionMs: "1000", topic.SegmentBytes: "2048"}
				return o
			}},
		{name: "delete config", target: "t",
			fn:   func(tp *topic.Topic) error { delete(tp.Configs, topic.RetentionMs); return nil },
			want: func(o topic.Topic) topic.Topic { o.Configs = map[string]string{}; return o }},
		{name: "fn error leaves the topic unchanged", target: "t",
			fn: func(tp *topic.Topic) error {
				tp.Partitions = 99
				tp.Configs[topic.RetentionMs] = "5"
				return errFn
			},
			wantErr: errFn,
			want:    func(o topic.Topic) topic.Topic { return o }},
		{name: "missing topic", target: "nope",
			fn:      func(*topic.Topic) error { t.Fatal("fn called for a missing topic"); return nil },
			wantErr: topic.ErrNotFound,
			want:    func(o topic.Topic) topic.Topic { return o }},
		{name: "name differing in dot is a different topic", target: "t_x",
			fn:      func(*topic.Topic) error { t.Fatal("fn called for a missing topic"); return nil },
			wantErr: topic.ErrNotFound,
			want:    func(o topic.Topic) topic.Topic { return o }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := segment.NewMemFS()
			c := openCatalog(t, fs)
			orig := newTopic("t", 2, map[string]string{topic.RetentionMs: "1000"})
			require.NoError(t, c.Create(orig))
			require.NoError(t, c.Create(newTopic("t.x", 1, nil)))

			got, err := c.Update(tt.target, tt.fn)
			want := tt.want(orig)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				require.Equal(t, topic.Topic{}, got)
			} else {
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
			stored, ok := c.Get("t")
			require.True(t, ok)
			require.Equal(t, want, stored)
			reopened, ok := openCatalog(t, fs).Get("t")
			require.True(t, ok)
			require.Equal(t, want, reopened)
		})
	}
}

func TestCatalogDelete(t *testing.T) {
	fs := segment.NewMemFS()
	c := openCatalog(t, fs)
	a := newTopic("a.b", 1, map[string]string{topic.Durability: "fsync"})
	require.NoError(t, c.Create(a))
	require.NoError(t, c.Create(newTopic("keep", 1, nil)))

	_, err := c.Delete("a_b")
	require.ErrorIs(t, err, topic.ErrNotFound)
	_, err = c.Delete("missing")
	require.ErrorIs(t, err, topic.ErrNotFound)
	require.Contains(t, err.Error(), "missing")

	got, err := c.Delete("a.b")
	require.NoError(t, err)
	require.Equal(t, a, got)
	_, ok := c.Get("a.b")
	require.False(t, ok)
	require.Equal(t, []string{"keep"}, names(c.List()))

	_, err = c.Delete("a.b")
	require.ErrorIs(t, err, topic.ErrNotFound)

	// The name, and its '.'/'_' twin, are free again.
	require.NoError(t, c.Create(newTopic("a_b", 1, nil)))
	require.ErrorIs(t, c.Create(newTopic("a.b", 1, nil)), topic.ErrExists)

	require.Equal(t, []string{"a_b", "keep"}, names(openCatalog(t, fs).List()))
}

func TestCatalogPersistence(t *testing.T) {
	fs := segment.NewMemFS()
	c := openCatalog(t, fs)
	t1 := newTopic("one", 1, nil)
	t2 := newTopic("two", 6, map[string]string{topic.RetentionMs: "-1", topic.CleanupPolicy: "delete"})
	t2.ReplicationFactor = 3
	t3 := newTopic("three", 2, nil)
	require.NoError(t, c.Create(t1))
	require.NoError(t, c.Create(t2))
	require.NoError(t, c.Create(t3))
	_, err := c.Update("one", func(tp *topic.Topic) error { tp.Partitions = 4; return nil })
	require.NoError(t, err)
	_, err = c.Delete("three")
	require.NoError(t, err)

	want := c.List()
	require.Len(t, want, 2)

	c2 := openCatalog(t, fs)
	require.Equal(t, want, c2.List())
	got, ok := c2.Get("two")
	require.True(t, ok)
	require.Equal(t, t2, got)
	require.Equal(t, t2.ID, got.ID)

	// A second catalog in another directory of the same FS is independent.
	other, err := topic.OpenCatalog(fs, "/meta/other")
	require.NoError(t, err)
	require.Empty(t, other.List())

	// Only the catalog file is left; the temporary file was renamed.
	entries, err := fs.ReadDir(catalogDir)
	require.NoError(t, err)
	require.Equal(t, []string{"topics.json"}, entries)
}

func TestCatalogSurvivesCrash(t *testing.T) {
	fs := segment.NewMemFS()
	c := openCatalog(t, fs)
	created := newTopic("durable", 3, map[string]string{topic.Durability: "fsync"})
	require.NoError(t, c.Create(created))

	crashed := fs.Crash(0)
	got, ok := openCatalog(t, crashed).Get("durable")
	require.True(t, ok, "topic lost by a crash right after Create")
	require.Equal(t, created, got)

	// The same holds for updates and deletes.
	_, err := c.Update("durable", func(tp *topic.Topic) error { tp.Partitions = 5; return nil })
	require.NoError(t, err)
	got, ok = openCatalog(t, fs.Crash(0)).Get("durable")
	require.True(t, ok)
	require.EqualValues(t, 5, got.Partitions)

	_, err = c.Delete("durable")
	require.NoError(t, err)
	require.Empty(t, openCatalog(t, fs.Crash(0)).List())
}

func TestOpenCatalogErrors(t *testing.T) {
	t.Run("corrupt file", func(t *testing.T) {
		fs := segment.NewMemFS()
		require.NoError(t, fs.MkdirAll(catalogDir, 0o755))
		require.NoError(t, topic.WriteFileAtomic(fs, path.Join(catalogDir, "topics.json"), []byte("{not json")))
		_, err := topic.OpenCatalog(fs, catalogDir)
		require.Error(t, err)
		require.Contains(t, err.Error(), "decode catalog")
	})
	t.Run("bad topic id", func(t *testing.T) {
		fs := segment.NewMemFS()
		require.NoError(t, fs.MkdirAll(catalogDir, 0o755))
		data := `[{"name":"x","id":"1234","partitions":1,"replicationFactor":1}]`
		require.NoError(t, topic.WriteFileAtomic(fs, path.Join(catalogDir, "topics.json"), []byte(data)))
		_, err := topic.OpenCatalog(fs, catalogDir)
		require.Error(t, err)
	})
	t.Run("directory is a file", func(t *testing.T) {
		fs := segment.NewMemFS()
		require.NoError(t, fs.MkdirAll("/meta", 0o755))
		require.NoError(t, topic.WriteFileAtomic(fs, catalogDir, []byte("x")))
		_, err := topic.OpenCatalog(fs, catalogDir)
		require.Error(t, err)
		require.Contains(t, err.Error(), "open catalog")
	})
	t.Run("empty list", func(t *testing.T) {
		fs := segment.NewMemFS()
		require.NoError(t, fs.MkdirAll(catalogDir, 0o755))
		require.NoError(t, topic.WriteFileAtomic(fs, path.Join(catalogDir, "topics.json"), []byte("[]")))
		c, err := topic.OpenCatalog(fs, catalogDir)
		require.NoError(t, err)
		require.Empty(t, c.List())
	})
}

// failFS fails renames when failRename is set, so that saving the catalog
// fails after the temporary file was written.
type failFS struct {
	*segment.MemFS
	failRename bool
}

var errRename = errors.New("injected rename failure")

func (f *failFS) Rename(oldname, newname string) error {
	if f.failRename {
		return errRename
	}
	return f.MemFS.Rename(oldname, newname)
}

func TestCatalogRollsBackFailedSaves(t *testing.T) {
	fs := &failFS{MemFS: segment.NewMemFS()}
	c := openCatalog(t, fs)
	orig := newTopic("t", 1, map[string]string{topic.RetentionMs: "1"})
	require.NoError(t, c.Create(orig))
	fs.failRename = true

	tests := []struct {
		name string
		op   func() error
	}{
		{name: "create", op: func() error { return c.Create(newTopic("new", 1, nil)) }},
		{name: "update", op: func() error {
			_, err := c.Update("t", func(tp *topic.Topic) error { tp.Partitions = 9; tp.Configs["x"] = "y"; return nil })
			return err
		}},
		{name: "delete", op: func() error { _, err := c.Delete("t"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			require.ErrorIs(t, err, errRename)
			require.Equal(t, []topic.Topic{orig}, c.List())
		})
	}
	fs.failRename = false
	require.Equal(t, []topic.Topic{orig}, openCatalog(t, fs).List())
}

func TestWriteFileAtomic(t *testing.T) {
	fs := segment.NewMemFS()
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	name := "/d/f"
	require.NoError(t, topic.WriteFileAtomic(fs, name, []byte("first")))
	require.NoError(t, topic.WriteFileAtomic(fs, name, []byte("second, longer")))
	require.NoError(t, topic.WriteFileAtomic(fs, name, []byte("3rd")))

	for _, fsys := range []*segment.MemFS{fs, fs.Crash(0)} {
		f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
		require.NoError(t, err)
		buf := make([]byte, 64)
		n, _ := f.ReadAt(buf, 0)
		require.Equal(t, "3rd", string(buf[:n]))
		require.NoError(t, f.Close())
		entries, err := fsys.ReadDir("/d")
		require.NoError(t, err)
		require.Equal(t, []string{"f"}, entries)
	}

	err := topic.WriteFileAtomic(fs, "/missing/dir/f", []byte("x"))
	require.Error(t, err)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestNewID(t *testing.T) {
	seen := map[topic.ID]bool{}
	for range 100 {
		id := topic.NewID()
		require.False(t, seen[id], "duplicate id %s", id)
		seen[id] = true
		require.Equal(t, byte(0x40), id[6]&0xf0, "version nibble of %s", id)
		require.Equal(t, byte(0x80), id[8]&0xc0, "variant bits of %s", id)
		s := id.String()
		require.Len(t, s, 32)
		require.Equal(t, strings.ToLower(s), s)
	}
}

func TestIDText(t *testing.T) {
	want := topic.ID{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x46, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	tests := []struct {
		name    string
		text    string
		want    topic.ID
		wantErr bool
	}{
		{name: "lower case", text: "00112233445546778899aabbccddeeff", want: want},
		{name: "upper case", text: "00112233445546778899AABBCCDDEEFF", want: want},
		{name: "zero", text: strings.Repeat("0", 32)},
		{name: "empty", text: "", wantErr: true},
		{name: "31 digits", text: strings.Repeat("a", 31), wantErr: true},
		{name: "33 digits", text: strings.Repeat("a", 33), wantErr: true},
		{name: "34 digits", text: strings.Repeat("a", 34), wantErr: true},
		{name: "not hex", text: "0011223344554677889Xaabbccddeeff", wantErr: true},
		{name: "dashed UUID", text: "00112233-4455-4677-8899-aabbccddeeff", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var id topic.ID
			err := id.UnmarshalText([]byte(tt.text))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, id)
			b, err := id.MarshalText()
			require.NoError(t, err)
			require.Equal(t, strings.ToLower(tt.text), string(b))
		})
	}
}

func TestIDJSONRoundTrip(t *testing.T) {
	ids := []topic.ID{{}, topic.NewID(), topic.NewID(), {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for _, id := range ids {
		t.Run(id.String(), func(t *testing.T) {
			b, err := json.Marshal(id)
			require.NoError(t, err)
			require.Equal(t, `"`+id.String()+`"`, string(b))
			var back topic.ID
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, id, back)

			tp := topic.Topic{Name: "t", ID: id, Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"a": "b"}}
			b, err = json.Marshal(tp)
			require.NoError(t, err)
			require.Contains(t, string(b), `"id":"`+id.String()+`"`)
			var tpBack topic.Topic
			require.NoError(t, json.Unmarshal(b, &tpBack))
			require.Equal(t, tp, tpBack)

			// As a map key too.
			m := map[topic.ID]int{id: 1}
			b, err = json.Marshal(m)
			require.NoError(t, err)
			var mBack map[topic.ID]int
			require.NoError(t, json.Unmarshal(b, &mBack))
			require.Equal(t, m, mBack)
		})
	}
	var id topic.ID
	require.Error(t, json.Unmarshal([]byte(`"abc"`), &id))
	require.Error(t, json.Unmarshal([]byte(`[1,2,3]`), &id))
}
