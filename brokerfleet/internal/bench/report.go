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
	if x := r.Restart; x != nil {
		fmt.Fprintf(w, "\nrestart after kill -9: %s of records × RF %d in %d partitions on %s: serving %.2f s after the start, every partition led with a full ISR after %.2f s\n",
			Size(x.LogBytes), x.RF, x.Partitions, x.Target, x.ServeSeconds, x.ISRSeconds)
	}
}
