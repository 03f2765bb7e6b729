package broker_test

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// rawConn sends hand-made frames.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return c
}

func frame(key, version int16, corr int32, body []byte) []byte {
	b := make([]byte, 4, 64+len(body))
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func readResponse(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var sz [4]byte
	_, err := io.ReadFull(c, sz[:])
	require.NoError(t, err)
	buf := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	return buf
}

func requireClosed(t *testing.T, c net.Conn) {
	t.Helper()
	var one [1]byte
	_, err := c.Read(one[:])
	require.ErrorIs(t, err, io.EOF, "the broker closes the connection")
}

// batch encodes a valid RecordBatch v2 with n records.
func batch(pid int64, epoch int16, seq int32, n int, valueSize int) []byte {
	var records []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: make([]byte, valueSize)}
		rec := r.AppendTo(nil)
		records = append(records, rec...)
	}
	rb := kmsg.RecordBatch{
		Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq, NumRecords: int32(n), Records: records,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func produceRaw(t *testing.T, cl *kgo.Client, topicName string, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	return produceRawTo(t, cl, topicName, 0, records)
}

// produceRawTo sends one hand-made batch to a partition. kgo sends a raw
// Produce with the acks its client is configured with (default all).
func produceRawTo(t *testing.T, cl *kgo.Client, topicName string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topicName
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0]
}

func TestFrameLimits(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) { c.MaxRequestBytes = 1 << 20 })
	t.Run("over the cap", func(t *testing.T) {
		c := rawConn(t, b.Addr)
		_, err := c.Write([]byte{0x7f, 0xff, 0xff, 0xff})
		require.NoError(t, err)
		requireClosed(t, c)
	})
	t.Run("negative size", func(t *testing.T) {
		c := rawConn(t, b.Addr)
		_, err := c.Write([]byte{0xff, 0xff, 0xff, 0xf0, 1, 2, 3})
		require.NoError(t, err)
		requireClosed(t, c)
	})
	t.Run("truncated header", func(t *testing.T) {
		c := rawConn(t, b.Addr)
		_, err := c.Write([]byte{0, 0, 0, 3, 0, 18, 0})
		require.NoError(t, err)
		requireClosed(t, c)
	})
	t.Run("unknown api key", func(t *testing.T) {
		c := rawConn(t, b.Addr)
		_, err := c.Write(frame(9999, 0, 77, nil))
		require.NoError(t, err)
		resp := readResponse(t, c)
		require.Equal(t, int32(77), int32(binary.BigEndian.Uint32(resp)))
		require.Equal(t, kerr.UnsupportedVersion.Code, int16(binary.BigEndian.Uint16(resp[4:])))
		requireClosed(t, c)
	})
	t.Run("unsupported version", func(t *testing.T) {
		c := rawConn(t, b.Addr)
		_, err := c.Write(frame(3, 99, 5, nil)) // Metadata v99
		require.NoError(t, err)
		resp := readResponse(t, c)
		require.Equal(t, kerr.UnsupportedVersion.Code, int16(binary.BigEndian.Uint16(resp[4:])))
	})
	t.Run("ApiVersions too new answers v0 with our ranges", func(t *testing.T) {
		c := rawConn(t, b.Addr)
		_, err := c.Write(frame(18, 99, 6, nil))
		require.NoError(t, err)
		raw := readResponse(t, c)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		require.NoError(t, resp.ReadFrom(raw[4:]))
		require.Equal(t, kerr.UnsupportedVersion.Code, resp.ErrorCode)
		require.NotEmpty(t, resp.ApiKeys)
		// The connection stays usable: a supported ApiVersions works.
		_, err = c.Write(frame(18, 0, 7, nil))
		require.NoError(t, err)
		raw = readResponse(t, c)
		require.NoError(t, resp.ReadFrom(raw[4:]))
		require.Equal(t, int16(0), resp.ErrorCode)
	})
	t.Run("garbage body", func(t *testing.T) {
		c := rawConn(t, b.Addr)
		_, err := c.Write(frame(3, 4, 8, []byte{0x7f, 0xff, 0xff, 0xff})) // Metadata v4 claiming 2^31 topics
		require.NoError(t, err)
		requireClosed(t, c)
	})
	// The broker still serves after all that.
	cl := brokertest.Client(t, b.Addr)
	require.NoError(t, cl.Ping(context.Background()))
}

func TestProduceRejectsBadBatches(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "strict", 1, map[string]*string{"max.message.bytes": strp("2000")})
	cl := brokertest.Client(t, b.Addr)
	hwm := func() int64 {
		got, err := brokertest.Admin(t, b.Addr).ListEndOffsets(context.Background(), "strict")
		require.NoError(t, err)
		o, _ := got.Lookup("strict", 0)
		return o.Offset
	}

	bad := batch(-1, -1, -1, 3, 10)
	bad[len(bad)-1] ^= 0xff
	require.Equal(t, kerr.CorruptMessage.Code, produceRaw(t, cl, "strict", bad).ErrorCode)

	require.Equal(t, kerr.MessageTooLarge.Code, produceRaw(t, cl, "strict", batch(-1, -1, -1, 3, 1000)).ErrorCode)
	require.Equal(t, kerr.CorruptMessage.Code, produceRaw(t, cl, "strict", batch(-1, -1, -1, 3, 10)[:40]).ErrorCode)
	two := append(batch(-1, -1, -1, 1, 10), batch(-1, -1, -1, 1, 10)...)
	require.Equal(t, kerr.InvalidRecord.Code, produceRaw(t, cl, "strict", two).ErrorCode)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, produceOnConn(t, b.Addr, "no-such-topic-here", 0, batch(-1, -1, -1, 1, 10)).ErrorCode, "the broker itself answers")
	require.Equal(t, int64(0), hwm(), "nothing was stored")

	ok := produceRaw(t, cl, "strict", batch(-1, -1, -1, 3, 10))
	require.Equal(t, int16(0), ok.ErrorCode)
	require.Equal(t, int64(3), hwm())
}

func TestIdempotenceWindow(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "idem", 1, nil)
	cl := brokertest.Client(t, b.Addr)
	const pid = 4242
	first := produceRaw(t, cl, "idem", batch(pid, 3, 0, 5, 10))
	require.Equal(t, int16(0), first.ErrorCode)
	second := produceRaw(t, cl, "idem", batch(pid, 3, 5, 5, 10))
	require.Equal(t, int16(0), second.ErrorCode)
	require.Equal(t, int64(5), second.BaseOffset)

	// A repeat of the first batch answers with its original offset.
	dup := produceRaw(t, cl, "idem", batch(pid, 3, 0, 5, 10))
	require.Equal(t, int16(0), dup.ErrorCode)
	require.Equal(t, int64(0), dup.BaseOffset)

	// A gap in sequence numbers.
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, produceRaw(t, cl, "idem", batch(pid, 3, 11, 1, 10)).ErrorCode)
	// An older epoch is fenced.
	require.Equal(t, kerr.InvalidProducerEpoch.Code, produceRaw(t, cl, "idem", batch(pid, 2, 10, 1, 10)).ErrorCode)
	// A newer epoch must start at sequence 0.
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, produceRaw(t, cl, "idem", batch(pid, 4, 3, 1, 10)).ErrorCode)
	next := produceRaw(t, cl, "idem", batch(pid, 4, 0, 1, 10))
	require.Equal(t, int16(0), next.ErrorCode)
	require.Equal(t, int64(10), next.BaseOffset)

	// The window survives a restart: it is rebuilt from the log.
	b2 := b.Restart(t)
	cl2 := brokertest.Client(t, b2.Addr)
	again := produceRaw(t, cl2, "idem", batch(pid, 4, 0, 1, 10))
	require.Equal(t, int16(0), again.ErrorCode)
	require.Equal(t, int64(10), again.BaseOffset, "duplicate recognised after restart")
	require.Equal(t, kerr.InvalidProducerEpoch.Code, produceRaw(t, cl2, "idem", batch(pid, 3, 10, 1, 10)).ErrorCode)
}
