package broker

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceFrames pools the buffers of Produce request frames. A producer
// at full speed sends requests of a few MiB each, one after another;
// reading each into a new buffer (grown eightfold as its bytes arrived,
// so copied on the way) cost about 1.4 GB of allocation per GiB
// produced, all of it zeroed and then collected. A produce frame is let
// go once its batches are appended (handleProduce), so its buffer can
// take the next one. Other frames, whose requests may keep their bytes
// (kmsg decodes byte fields as views of the frame), are never pooled.
//
// Buffers come in power-of-two sizes from minPooledFrame to
// maxPooledFrame; a frame outside that range is read as before.
var produceFrames [bits.UintSize]sync.Pool

const (
	minPooledFrame = 128 << 10
	maxPooledFrame = 16 << 20
)

// pooledSize reports whether a produce frame of size bytes is read into
// a pooled buffer (frameReader.next); smaller ones are allocated to fit.
func pooledSize(size int) bool { return size > minPooledFrame/2 && size <= maxPooledFrame }

// frameClass is the pool of buffers that hold size bytes.
func frameClass(size int) int { return bits.Len(uint(size - 1)) }

// getFrame returns a buffer with room for size bytes, its contents
// undefined (ReadBodyInto overwrites the size bytes the frame uses).
func getFrame(size int) []byte {
	c := frameClass(size)
	if b, ok := produceFrames[c].Get().(*[]byte); ok {
		reusedFrames.Add(1)
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<c)
}

// putProduceFrame gives back the frame of a produce request that has been
// handled: req's record sets, views of the frame, are cut loose first so
// that nothing reads the buffer once the next frame reuses it. Frames not
// of a pool's size are left to the collector.
func putProduceFrame(req kmsg.Request, frame []byte) {
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return
	}
	for i := range pr.Topics {
		for j := range pr.Topics[i].Partitions {
			pr.Topics[i].Partitions[j].Records = nil
		}
	}
	c := cap(frame)
	if c < minPooledFrame || c > maxPooledFrame || c&(c-1) != 0 {
		return
	}
	frame = frame[:0]
	produceFrames[frameClass(c)].Put(&frame)
}

// reusedFrames counts the produce frames read into a buffer that an
// earlier frame gave back (tests check that the pool is used).
var reusedFrames atomic.Int64
