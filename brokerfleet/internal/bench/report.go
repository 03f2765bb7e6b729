package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Report is everything one `brokerfleet bench` invocation measured; it is
// what -json writes.
type Report struct {
	Started  string   `json:"started"`
	Command  string   `json:"command"`
	CPUs     int      `json:"cpus"`
	Baseline string   `json:"baseline,omitempty"` // the target the ratios divide by
	Results  []Result `json:"results"`
	// The disk's sequential write bandwidth (MB/s) under the data
	// directory and, divided by the replication factor, the physical limit
	// of replicated produce on one machine.
	DiskWriteMBps float64     `json:"disk_write_mbps,omitempty"`
	Idle          *Idle       `json:"idle,omitempty"`
	Restart       *Restart    `json:"restart,omitempty"`
	Groups        []GroupJoin `json:"groups,omitempty"`
	Share         *Share      `json:"share,omitempty"`
}

// Share is the share-group measurement: one topic, read in full by a
// share group and by a classic consumer group of each consumer count.
type Share struct {
	Target      string     `json:"target"`
	Partitions  int        `json:"partitions"`
	RF          int        `json:"replication_factor"`
	Records     int64      `json:"records"` // in the topic
	RecordBytes int        `json:"record_bytes"`
	Runs        []ShareRun `json:"runs"` // per consumer count: the share group, then the classic group
}

// ShareRun is one group of Consumers reading the whole topic: each
// consumer (its own client) polls, acknowledges what it got (share:
// ACCEPT each record, then FlushAcks; classic: a synchronous commit) and
// polls again.
type ShareRun struct {
	Group     string `json:"group"` // share or classic
	Consumers int    `json:"consumers"`
	Active    int    `json:"active_consumers"` // consumers that got records (classic: at most one per partition)
	// Records is the distinct records read and acknowledged (or
	// committed); Deliveries counts redeliveries too.
	Records       int64   `json:"records"`
	Deliveries    int64   `json:"deliveries"`
	Seconds       float64 `json:"seconds"` // from the first record to the last acknowledgement confirmed
	MBps          float64 `json:"mbps"`    // MB/s (10^6 bytes) of record values
	RecordsPerSec float64 `json:"records_per_second"`
	// AckLatency times each poll's acknowledgement from sending to its
	// confirmation: kgo's FlushAcks (share) or CommitUncommittedOffsets
	// (classic).
	AckLatency Latency `json:"ack_latency"`
	// AckErrors counts share partitions whose acknowledgement the broker
	// refused (their records are delivered again and count once they are
	// confirmed) or classic commits that failed (a later one covers them).
	AckErrors int64 `json:"ack_errors"`
	// Metastore writes (put, add, delete, transact: every result) by all
	// brokers from the first consumer's start to the last confirmation,
	// and per 1,000 distinct records.
	MetastoreWrites   int64   `json:"metastore_writes"`
	WritesPerThousand float64 `json:"metastore_writes_per_1000_records"`
	// Share only, from the brokers' metrics over the same span: the share
	// state writes and the offsets acknowledged.
	ShareStateWrites int64 `json:"share_state_writes,omitempty"`
	BrokerAcked      int64 `json:"broker_acknowledged,omitempty"`
}

// GroupJoin is one member joining a consumer group of Members-1.
type GroupJoin struct {
	Protocol        string  `json:"protocol"`          // classic or consumer (KIP-848)
	Members         int     `json:"members"`           // with the new one
	JoinSeconds     float64 `json:"join_seconds"`      // its client's start to its first record
	MaxPauseSeconds float64 `json:"max_pause_seconds"` // the longest gap of an earlier member's records meanwhile
}

// Restart is a target's time to ready after kill -9.
type Restart struct {
	Target       string  `json:"target"`
	Partitions   int     `json:"partitions"`
	RF           int     `json:"replication_factor"`
	LogBytes     int64   `json:"log_bytes"`     // record values written before the kill
	ServeSeconds float64 `json:"serve_seconds"` // from the restart until it serves
	ISRSeconds   float64 `json:"isr_seconds"`   // until every partition is led with a full ISR
}

// Idle is an idle cluster holding many partitions.
type Idle struct {
	Target        string  `json:"target"`
	Partitions    int     `json:"partitions"`
	RF            int     `json:"replication_factor"`
	Seconds       float64 `json:"seconds"`
	CPUPercent    float64 `json:"cpu_percent"` // of one core
	RSSBefore     int64   `json:"rss_before_bytes"`
	RSSAfter      int64   `json:"rss_after_bytes"`
	BytesPerPart  int64   `json:"rss_per_partition_bytes"` // (after - before) / partitions, all replicas of one partition
	StartupSecond float64 `json:"create_seconds"`          // until every partition had a leader and a full ISR
}

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// baseline returns the baseline's result for res's workload, if any.
func (r *Report) baseline(res Result) (Result, bool) {
	for _, b := range r.Results {
		if b.Target == r.Baseline && b.RecordBytes == res.RecordBytes && b.Keyed == res.Keyed &&
			b.Partitions == res.Partitions && b.Acks == res.Acks && b.Records == res.Records && b.Error == "" {
			return b, true
		}
	}
	return Result{}, false
}

// Table writes one row per workload and target, with ratios to the
// baseline target's run of the same workload (durability aside: the
// baseline has one).
func (r *Report) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\ttarget\tMB/s prod\t×\tof limit\tMB/s cons\t×\tp50 ms\tp99 ms\t×\tp99.9 ms\tmax ms\tloaded p99 ms\tCPU prod\tCPU cons\tpeak MiB\t")
	ms := func(us int64) string { return fmt.Sprintf("%.2f", float64(us)/1000) }
	for _, res := range r.Results {
		if res.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\tfailed: %s\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", res.Workload, res.Target, res.Error)
			continue
		}
		pr, cr, lr, lim := "", "", "", "-"
		if r.DiskWriteMBps > 0 && res.RF > 0 && res.Target != r.Baseline {
			lim = fmt.Sprintf("%.0f%%", 100*res.ProduceMBps/(r.DiskWriteMBps/float64(res.RF)))
		}
		if b, ok := r.baseline(res); ok && res.Target != r.Baseline {
			pr = fmt.Sprintf("%.2f", res.ProduceMBps/b.ProduceMBps)
			cr = fmt.Sprintf("%.2f", res.ConsumeMBps/b.ConsumeMBps)
			lr = fmt.Sprintf("%.2f", float64(res.OneInFlightLatency.P99)/float64(max(b.OneInFlightLatency.P99, 1)))
		}
		cpuP, cpuC, mem := "-", "-", "-"
		if res.PeakRSS > 0 {
			cpuP, cpuC, mem = fmt.Sprintf("%.2f", res.ProduceCPU), fmt.Sprintf("%.2f", res.ConsumeCPU), fmt.Sprintf("%d", res.PeakRSS>>20)
		}
		l := res.OneInFlightLatency
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", res.Workload, res.Target,
			res.ProduceMBps, pr, lim, res.ConsumeMBps, cr, ms(l.P50), ms(l.P99), lr, ms(l.P999), ms(l.Max),
			ms(res.LoadedLatency.P99), cpuP, cpuC, mem)
	}
	tw.Flush()
	fmt.Fprintln(w, "latency columns: one record in flight (acks as the workload); loaded: Produce to ack with the 64 MiB producer buffer full.")
	fmt.Fprintln(w, "CPU: cores used by the serving process (CPU seconds per second); peak MiB: its peak resident memory over the workload.")
	if r.DiskWriteMBps > 0 {
		fmt.Fprintf(w, "of limit: produce throughput / (the disk's sequential write bandwidth, %.0f MB/s, / the replication factor): one machine's physical limit.\n", r.DiskWriteMBps)
	}
	r.stageTable(w)
	r.scalingTable(w)
	r.peerTable(w)
	if i := r.Idle; i != nil {
		fmt.Fprintf(w, "\nidle: %d partitions × RF %d on %s: %.2f%% of one core over %.0f s; RSS %d MiB → %d MiB (%.1f KiB per partition); created in %.1f s\n",
			i.Partitions, i.RF, i.Target, i.CPUPercent, i.Seconds, i.RSSBefore>>20, i.RSSAfter>>20, float64(i.BytesPerPart)/1024, i.StartupSecond)
	}
	for _, g := range r.Groups {
		fmt.Fprintf(w, "\ngroup join: %s protocol, member %d of %d: first record %.2f s after its start, earlier members paused at most %.2f s", g.Protocol, g.Members, g.Members, g.JoinSeconds, g.MaxPauseSeconds)
	}
	if len(r.Groups) > 0 {
		fmt.Fprintln(w)
	}
	if s := r.Share; s != nil {
		s.table(w)
	}
	if x := r.Restart; x != nil {
		fmt.Fprintf(w, "\nrestart after kill -9: %s of records × RF %d in %d partitions on %s: serving %.2f s after the start, every partition led with a full ISR after %.2f s\n",
			Size(x.LogBytes), x.RF, x.Partitions, x.Target, x.ServeSeconds, x.ISRSeconds)
	}
}

// table writes the share-group section.
func (s *Share) table(w io.Writer) {
	fmt.Fprintf(w, "\nshare groups: %d records of %s in %d partitions × RF %d on %s, read in full by each group\n",
		s.Records, Size(int64(s.RecordBytes)), s.Partitions, s.RF, s.Target)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "consumers\tgroup\tactive\tMB/s\trecords/s\tack p50 ms\tack p99 ms\tmetastore writes/1,000\tredelivered\t")
	ms := func(us int64) string { return fmt.Sprintf("%.2f", float64(us)/1000) }
	idle := false
	for _, r := range s.Runs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.0f\t%s\t%s\t%.1f\t%d\t\n", r.Consumers, r.Group, r.Active, r.MBps, r.RecordsPerSec,
			ms(r.AckLatency.P50), ms(r.AckLatency.P99), r.WritesPerThousand, r.Deliveries-r.Records)
		idle = idle || (r.Group == "classic" && r.Consumers > s.Partitions)
	}
	tw.Flush()
	fmt.Fprintln(w, "ack: one per poll, from sending to confirmation (share: ACCEPT every record, then FlushAcks; classic: CommitUncommittedOffsets).")
	fmt.Fprintln(w, "MB/s, records/s: from the first record to the last confirmation; metastore writes by all brokers over the same span.")
	if idle {
		fmt.Fprintf(w, "classic: a partition has one consumer, so consumers beyond the %d partitions are idle.\n", s.Partitions)
	}
}
