"""Contains all the data models used in inputs/outputs"""

from .ack_entry import AckEntry
from .ack_many_request import AckManyRequest
from .ack_many_response import AckManyResponse
from .ack_request import AckRequest
from .ack_result import AckResult
from .backoff_kind import BackoffKind
from .backoff_spec import BackoffSpec
from .cancel_request import CancelRequest
from .claim_request import ClaimRequest
from .claim_response import ClaimResponse
from .class_view import ClassView
from .dead_jobs_page import DeadJobsPage
from .dedup_mode import DedupMode
from .dedup_request import DedupRequest
from .dependency_state import DependencyState
from .dependency_view import DependencyView
from .effect import Effect
from .enqueue_batch_request import EnqueueBatchRequest
from .enqueue_request import EnqueueRequest
from .event_view import EventView
from .extend_request import ExtendRequest
from .group_view import GroupView
from .groups_page import GroupsPage
from .history_view import HistoryView
from .job_list import JobList
from .job_view import JobView
from .nack_request import NackRequest
from .on_dependency_failure import OnDependencyFailure
from .on_expiry import OnExpiry
from .problem import Problem
from .problem_code import ProblemCode
from .push_health_view import PushHealthView
from .push_request import PushRequest
from .push_view import PushView
from .queue_list import QueueList
from .queue_view import QueueView
from .rate_limit_patch import RateLimitPatch
from .rate_limit_view import RateLimitView
from .requeue_request import RequeueRequest
from .scale_view import ScaleView
from .schedule_list import ScheduleList
from .schedule_request import ScheduleRequest
from .schedule_view import ScheduleView
from .search_page_view import SearchPageView
from .settings_patch import SettingsPatch
from .settings_patch_group_weights_type_0 import SettingsPatchGroupWeightsType0
from .settings_view import SettingsView
from .settings_view_group_weights import SettingsViewGroupWeights
from .state_name import StateName
from .status import Status
from .trace_view import TraceView

__all__ = (
    "AckEntry",
    "AckManyRequest",
    "AckManyResponse",
    "AckRequest",
    "AckResult",
    "BackoffKind",
    "BackoffSpec",
    "CancelRequest",
    "ClaimRequest",
    "ClaimResponse",
    "ClassView",
    "DeadJobsPage",
    "DedupMode",
    "DedupRequest",
    "DependencyState",
    "DependencyView",
    "Effect",
    "EnqueueBatchRequest",
    "EnqueueRequest",
    "EventView",
    "ExtendRequest",
    "GroupsPage",
    "GroupView",
    "HistoryView",
    "JobList",
    "JobView",
    "NackRequest",
    "OnDependencyFailure",
    "OnExpiry",
    "Problem",
    "ProblemCode",
    "PushHealthView",
    "PushRequest",
    "PushView",
    "QueueList",
    "QueueView",
    "RateLimitPatch",
    "RateLimitView",
    "RequeueRequest",
    "ScaleView",
    "ScheduleList",
    "ScheduleRequest",
    "ScheduleView",
    "SearchPageView",
    "SettingsPatch",
    "SettingsPatchGroupWeightsType0",
    "SettingsView",
    "SettingsViewGroupWeights",
    "StateName",
    "Status",
    "TraceView",
)
