package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Transactions: aborts counted as the coordinator decides them, by cause;
// at scrape time, from memory, the transactions this broker coordinates
// that are ongoing, and over the partitions it leads the transactions
// open in them and how far the last stable offset trails the high
// watermark (what holds read_committed consumers back).

var (
	descTxnOngoing = prometheus.NewDesc("strata_transactions_ongoing",
		"Transactions this broker coordinates that are ongoing (begun, not yet decided) or decided with markers still being written.", nil, nil)
	descTxnOpenInPartitions = prometheus.NewDesc("strata_partition_open_transactions",
		"Over the partitions this broker leads: transactions with records in them and no marker yet.", nil, nil)
	descLSOLag = prometheus.NewDesc("strata_last_stable_offset_lag_max",
		"Over the partitions this broker leads: the largest high watermark minus last stable offset, in offsets (read_committed consumers wait below the last stable offset).", nil, nil)
)

// TxnSource is what the transaction gauges read, all in memory.
type TxnSource interface {
	// TransactionsOngoing counts the transactions this broker coordinates
	// that are not complete.
	TransactionsOngoing() int
	// PartitionTransactions returns, over the partitions this broker
	// leads, the transactions open in them and the largest LSO lag.
	PartitionTransactions() (open int, maxLag int64)
}

type txnCollector struct{ src TxnSource }

func (c txnCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTxnOngoing
	ch <- descTxnOpenInPartitions
	ch <- descLSOLag
}

func (c txnCollector) Collect(ch chan<- prometheus.Metric) {
	open, lag := c.src.PartitionTransactions()
	ch <- prometheus.MustNewConstMetric(descTxnOngoing, prometheus.GaugeValue, float64(c.src.TransactionsOngoing()))
	ch <- prometheus.MustNewConstMetric(descTxnOpenInPartitions, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(descLSOLag, prometheus.GaugeValue, float64(lag))
}

// CollectTransactions registers the transaction gauges, read from src,
// and the abort counter.
func (m *Broker) CollectTransactions(src TxnSource) {
	m.reg.MustRegister(txnCollector{src}, m.txnAborts)
}

// TxnAborted counts a transaction abort the coordinator decided, by cause
// ("client", "timeout", "fenced").
func (m *Broker) TxnAborted(cause string) {
	if m == nil {
		return
	}
	m.txnAborts.WithLabelValues(cause).Inc()
}
