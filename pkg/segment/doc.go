// Package segment is Strata's partition log: append-only segment files that
// hold Kafka RecordBatch v2 bytes verbatim, with a sparse offset index and a
// sparse time index per segment, crash recovery, retention and truncation.
// All I/O goes through the small FS interface, implemented by OS (the real
// filesystem) and MemFS (in memory, able to simulate a crash). Wrap puts an
// Injector in front of any FS to fail chosen operations on chosen files
// (Fail, FailApplied, ShortWrite over predicates such as OnOps, PathMatch,
// And and Nth, armed at runtime through a Switch); the fault tests use it
// to fail every write, fsync, rename and remove the log performs.
//
// # On-disk layout
//
// A log directory holds, for every segment, named by the segment's base
// offset as 20 zero-padded decimal digits:
//
//   - <base>.log: whole batches back to back. The first batch has base
//     offset <base>; every next batch starts at the previous LastOffset()+1,
//     except in a log that may have gaps (below).
//   - <base>.index: 8-byte entries (uint32 base offset of a batch relative to
//     <base>, uint32 file position of the batch), big endian.
//   - <base>.timeindex: 12-byte entries (int64 timestamp, uint32 relative
//     base offset of a batch), big endian.
//
// and, for some offsets, <offset>.snapshot: the log owner's state derived
// from the headers of every batch below offset (snapshot.go; the partition
// writes one when a segment rolls, and the log removes those a truncation
// or reset makes untrue); and one file named checkpoint: magic, version, a clean-shutdown flag, the
// log start offset and the recovery point, followed by a CRC-32C. It and
// the index files are replaced atomically (write a .tmp file, fsync,
// rename); directory operations are made durable before they return.
//
// The last segment is the active one; appends go to it, each as a single
// write. It is rolled (a new segment started at NextOffset) when an append
// would push it past segment.bytes or it got its first batch longer than
// segment.ms ago. Rolling fsyncs the old segment, writes its index files,
// creates the new log file and then records the new segment's base as the
// recovery point.
//
// # Indexes
//
// Entries are added for the first batch of a segment and for every batch
// that starts at least IndexIntervalBytes after the previous entry's
// position. There the offset index gets (batch base offset, position) and,
// if the segment's running maximum timestamp grew since the last time
// entry, the time index gets (running maximum, batch base offset). When a
// segment is closed a last time entry carries the segment's maximum
// timestamp. So a read walks at most one index interval of headers to find
// an offset, and a timestamp lookup scans at most one interval too. Indexes
// are kept in memory; the files are written when a segment is closed (roll
// or Close) and exist only for closed segments.
//
// # Gaps and rewrites (compacted topics)
//
// The log cleaner of a compacted topic rewrites closed segments (rewrite.go:
// BeginRewrite, Rewrite.Add, Rewrite.Commit) keeping a subset of their
// batches at their offsets, so offsets between batches may hold no record,
// and the first batch of a segment may start past its base. A rewritten
// segment always keeps the last batch of what it replaces, so segments stay
// contiguous. The swap is crash-safe through <base>.cleaned and <base>.swap
// files, which Open deletes or completes. A follower copies a cleaned
// leader's batches with AppendFrom, which accepts gaps. A log that may have
// gaps has a file cleaner-checkpoint (the cleaner's first dirty offset,
// CleanedOffset); only then does recovery accept a batch that starts past
// the previous one's end. Reads at an offset in a gap return the next
// batch; TruncateTo into a gap cuts to the end of the batch before it.
//
// # Recovery
//
// Open reads the checkpoint (missing or corrupt: recovery point 0, start
// offset 0, not clean). If the clean flag is set, it is cleared on disk
// before anything else. Then, oldest first:
//
//   - after a clean shutdown no segment is scanned: indexes come from the
//     index files and only the batches after the last offset entry are
//     walked to find the end of the segment;
//   - otherwise every segment from the one containing the recovery point on
//     (all of them without a checkpoint) is scanned batch by batch: the
//     header must parse, the whole batch must be present, its CRC must match
//     and its base offset must be the expected next offset. Scanned files
//     are fsynced;
//   - a segment below the recovery point whose index files are missing or
//     invalid (size not a multiple of the entry size, entries not strictly
//     increasing, positions beyond the file, or a broken walk after the last
//     entry) is rebuilt by a scan that checks framing and offsets but not
//     CRCs, and its index files are rewritten.
//
// At the first invalid batch the file is cut there (after deleting its
// index files) and every later segment is deleted, newest first; a segment
// whose base is not the previous segment's end is deleted with all later
// ones too. The log is thus always the longest valid prefix. An empty log
// starts at offset 0 with one empty segment 00000000000000000000.log. The
// start offset becomes max(checkpoint start offset, first segment base);
// segments wholly below it are deleted, and if it lies beyond the
// recovered end (unflushed data was lost) the log restarts empty at it.
//
// # Invariants
//
//   - There is always at least one segment; segments are contiguous
//     (each base is the previous segment's NextOffset) and only the active
//     one may be empty.
//   - StartOffset lies in [first segment base, NextOffset] and never
//     decreases; it is persisted before segments below it are deleted.
//   - Every batch below FlushedOffset is durable. Closed segments are
//     durable and have index files describing exactly their bytes.
//   - A crash at any point leaves files from which Open recovers a prefix of
//     the log that contains every flushed batch (except after TruncateTo,
//     which removes batches on purpose).
//   - A failed fsync or truncate of a segment file (including the undo of
//     a partial write), or a ResetTo that could not replace the segments,
//     makes the Log refuse further writes and flushes, because memory may
//     no longer match the files; reads keep working and reopening
//     recovers. After any other failed operation the Log keeps working.
//   - Segment files are deleted oldest first (newest first when
//     truncating); retention and DeleteTo stop at the first they cannot
//     delete, so the files left stay contiguous, and Open deletes those
//     below the start offset.
package segment
