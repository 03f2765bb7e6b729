package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/controller"
	"github.com/stratamq/strata/brokerfleet/internal/fetchsession"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

// errorCode chooses the Kafka error code for err; this is the only place
// internal errors become protocol codes.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, topic.ErrInvalidName):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, topic.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, errTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, errUnknownTopic):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, errNotLeader), errors.Is(err, tier.ErrNotLoaded):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, metastore.ErrUnavailable), errors.Is(err, metastore.ErrConditionFailed):
		// The control plane is unreachable or busy: retriable.
		return kerr.RequestTimedOut.Code
	case errors.Is(err, errInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, errInvalidReplication), errors.Is(err, controller.ErrNotEnoughBrokers):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, metastore.ErrInvalidReassignment):
		return kerr.InvalidReplicaAssignment.Code
	case errors.Is(err, metastore.ErrNoReassignment):
		return kerr.NoReassignmentInProgress.Code
	case errors.Is(err, metastore.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code
	case errors.Is(err, metastore.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable.Code
	case errors.Is(err, metastore.ErrEligibleLeadersNotAvailable):
		return kerr.EligibleLeadersNotAvailable.Code
	case errors.Is(err, errInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, segment.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, segment.ErrCorrupt):
		return kerr.CorruptMessage.Code
	case errors.Is(err, records.ErrTooLarge), errors.Is(err, records.ErrMalformed):
		// Kafka's InvalidRecordException: not retriable, the batch is bad.
		return kerr.InvalidRecord.Code
	case errors.Is(err, partition.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, partition.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, partition.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, partition.ErrCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, partition.ErrClosed), errors.Is(err, segment.ErrClosed), errors.Is(err, partition.ErrNotReplica):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, fetchsession.ErrNotFound):
		return kerr.FetchSessionIDNotFound.Code
	case errors.Is(err, fetchsession.ErrInvalidEpoch):
		return kerr.InvalidFetchSessionEpoch.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	default:
		// Disk and other I/O failures: retriable, and the data is not acked.
		return kerr.KafkaStorageError.Code
	}
}

// errorMessage returns err's text for responses that carry a message, or
// nil for success.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
