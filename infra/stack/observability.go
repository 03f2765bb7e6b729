package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// MetricNamespace is the CloudWatch namespace of the brokers' Embedded
// Metric Format lines; every metric has the dimension Cluster = the
// cluster name.
const MetricNamespace = "Strata"

// The brokers' EMF metrics (the contract with brokerfleet): gauges are
// counts at the time of the line, ProduceErrors/ProduceBytes/FetchBytes
// are totals over the emit interval.
const (
	MetricMaxLag          = "MaxConsumerGroupLag"       // Count, max over groups and partitions
	MetricUnderReplicated = "UnderReplicatedPartitions" // Count
	MetricOffline         = "OfflinePartitions"         // Count
	MetricUnderMinIsr     = "UnderMinIsrPartitions"     // Count
	MetricProduceErrors   = "ProduceErrors"             // Count
	MetricProduceBytes    = "ProduceBytes"              // Bytes
	MetricFetchBytes      = "FetchBytes"                // Bytes
	MetricS3UploadLag     = "S3UploadLagSeconds"        // Seconds
	// Share groups (KIP-932), over the share partitions a broker leads:
	// records available for delivery (summed) and the age of the oldest
	// available record (the largest; 0 when none is available). The
	// brokers send them with the dimension Cluster over every group, and
	// per group with the dimensions Cluster and ShareGroup.
	MetricShareAvailable = "ShareRecordsAvailable"          // Count
	MetricShareOldestAge = "ShareOldestAvailableAgeSeconds" // Seconds
	MetricShareGroupDim  = "ShareGroup"                     // the second dimension of the per-group metrics
)

// Observability is the dashboard and the alarms over the brokers' EMF
// metrics, with an SNS topic for the alarms when alarmEmail is set.
type Observability struct {
	constructs.Construct
	Dashboard awscloudwatch.Dashboard
	Alarms    []awscloudwatch.Alarm
	Topic     awssns.Topic // nil without alarmEmail
}

// NewObservability builds the alarms and the dashboard for cfg's cluster.
func NewObservability(scope constructs.Construct, id string, cfg Config, fleet *Fleet) *Observability {
	c := constructs.NewConstruct(scope, jsii.String(id))
	o := &Observability{Construct: c}
	metric := func(name, stat string, period float64) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(MetricNamespace),
			MetricName:    jsii.String(name),
			DimensionsMap: &map[string]*string{"Cluster": jsii.String(cfg.ClusterName)},
			Statistic:     jsii.String(stat),
			Period:        awscdk.Duration_Minutes(jsii.Number(period)),
		})
	}
	alarm := func(id string, m awscloudwatch.Metric, op awscloudwatch.ComparisonOperator, threshold float64, periods float64,
		missing awscloudwatch.TreatMissingData, description string) {
		a := m.CreateAlarm(c, jsii.String(id), &awscloudwatch.CreateAlarmOptions{
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(periods),
			DatapointsToAlarm:  jsii.Number(periods),
			ComparisonOperator: op,
			TreatMissingData:   missing,
			AlarmDescription:   jsii.String(description),
		})
		o.Alarms = append(o.Alarms, a)
	}
	above := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	// Each broker sends its share of the partition counts (the controller
	// alone the offline count): "some broker reports > 0" is Maximum > 0.
	// Missing data in a count is "no news", not a breach; a cluster that
	// sends no metrics at all is caught by NoMetrics.
	quiet := awscloudwatch.TreatMissingData_NOT_BREACHING

	alarm("ConsumerLag", metric(MetricMaxLag, "Maximum", 5), above, float64(cfg.LagAlarmThreshold), 3, quiet,
		"A consumer group is more than lagAlarmThreshold records behind for 15 minutes.")
	alarm("UnderReplicated", metric(MetricUnderReplicated, "Maximum", 1), above, 0, 5, quiet,
		"Partitions have been under-replicated for 5 minutes.")
	alarm("UnderMinIsr", metric(MetricUnderMinIsr, "Maximum", 1), above, 0, 5, quiet,
		"Partitions have been under min.insync.replicas for 5 minutes: acks=all produces fail.")
	alarm("Offline", metric(MetricOffline, "Maximum", 1), above, 0, 1, quiet,
		"Partitions are offline (no leader).")
	alarm("ProduceErrors", metric(MetricProduceErrors, "Sum", 5), above, float64(cfg.ProduceErrorThreshold), 1, quiet,
		"More than produceErrorThreshold produce errors in 5 minutes.")
	// Every broker sends UnderReplicatedPartitions each EMF interval, even
	// when it is 0: no sample for 3 minutes means no broker reports.
	alarm("NoMetrics", metric(MetricUnderReplicated, "SampleCount", 1), awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD, 1, 3,
		awscloudwatch.TreatMissingData_BREACHING,
		"No broker has sent metrics for 3 minutes: the brokers are down or cannot write their logs.")

	// Per queue trigger, on its share group: a record waiting longer than
	// the threshold for delivery means the trigger is not keeping up, is
	// failing, or a record keeps being released. Sustained for 3 minutes,
	// so one EMF line does not page. The group's leaders send its
	// document every interval while its share partitions are loaded,
	// which a running trigger's fetches keep them: no document for 3
	// minutes means nobody fetches the group, a breach too.
	var ageMetrics []awscloudwatch.IMetric
	for _, q := range cfg.QueueTriggerList() {
		m := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:  jsii.String(MetricNamespace),
			MetricName: jsii.String(MetricShareOldestAge),
			DimensionsMap: &map[string]*string{
				"Cluster":           jsii.String(cfg.ClusterName),
				MetricShareGroupDim: jsii.String(q.Group),
			},
			Statistic: jsii.String("Maximum"),
			Period:    awscdk.Duration_Minutes(jsii.Number(1)),
		})
		// A label would turn the alarm's metric into a metric-math one.
		ageMetrics = append(ageMetrics, m.With(&awscloudwatch.MetricOptions{Label: jsii.String(q.Group)}))
		threshold := q.AgeAlarmSeconds
		if threshold == 0 {
			threshold = cfg.QueueAgeAlarmSeconds
		}
		alarm("QueueAge-"+q.Name, m, above, float64(threshold), 3, awscloudwatch.TreatMissingData_BREACHING,
			fmt.Sprintf("Queue trigger %s: the oldest available record of share group %s has waited more than %d s for 3 minutes, or no broker has reported the group (nobody fetches it): the trigger is behind or failing.",
				q.Name, q.Group, threshold))
	}

	if cfg.AlarmEmail != "" {
		o.Topic = awssns.NewTopic(c, jsii.String("AlarmTopic"), &awssns.TopicProps{
			DisplayName: jsii.String("Strata alarms (" + cfg.ClusterName + ")"),
			EnforceSSL:  jsii.Bool(true),
		})
		o.Topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(cfg.AlarmEmail), nil))
		action := awscloudwatchactions.NewSnsAction(o.Topic)
		for _, a := range o.Alarms {
			a.AddAlarmAction(action)
			a.AddOkAction(action)
		}
	}

	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	var alarms []interfacesawscloudwatch.IAlarmRef
	for _, a := range o.Alarms {
		alarms = append(alarms, a)
	}
	o.Dashboard = awscloudwatch.NewDashboard(c, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(3)),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
				Title: jsii.String("Strata alarms"), Alarms: &alarms, Width: jsii.Number(24), Height: jsii.Number(3),
			})},
			{
				// Each broker reports its share: the cluster's count is the sum.
				graph("Partitions not fully replicated (sum over brokers)",
					metric(MetricUnderReplicated, "Sum", 1), metric(MetricUnderMinIsr, "Sum", 1), metric(MetricOffline, "Sum", 1)),
				graph("Max consumer group lag (records)", metric(MetricMaxLag, "Maximum", 1)),
				graph("Produce errors", metric(MetricProduceErrors, "Sum", 1)),
			},
			{
				graph("Produce and fetch bytes", metric(MetricProduceBytes, "Sum", 1), metric(MetricFetchBytes, "Sum", 1)),
				graph("S3 upload lag (s)", metric(MetricS3UploadLag, "Maximum", 1)),
				graph("Broker CPU and memory (%)", fleet.Service.MetricCpuUtilization(nil), fleet.Service.MetricMemoryUtilization(nil)),
			},
			{
				graph("Share groups: records available (sum over brokers)", metric(MetricShareAvailable, "Sum", 1)),
				graph("Share groups: oldest available record (s)", append([]awscloudwatch.IMetric{metric(MetricShareOldestAge, "Maximum", 1)}, ageMetrics...)...),
			},
		},
	})
	return o
}
