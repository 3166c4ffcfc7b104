"""Summary-row keys that modules outside metrics/ and report/ read, as names.

Outside those two packages a row key is never spelled as a string
(tests/unit/metrics/test_row_keys.py): a misspelt name is an ImportError or a mypy
error, where a misspelt string read as an empty cell. Each name is its key in capitals,
and each key is declared in metrics/registry.py (the test checks both). Pure data.
"""

AL_AGREE = "al_agree"
AL_PROMETHEUS = "al_prometheus"
AL_REQUESTS = "al_requests"
AL_TOKENS = "al_tokens"
DRAFT_ACCEPTANCE_RATE = "draft_acceptance_rate"
E2E_S_MEAN = "e2e_s_mean"
GOODPUT = "goodput"
N_OK = "n_ok"
PER_POSITION_CONDITIONAL = "per_position_conditional"
PER_POSITION_JOINT = "per_position_joint"
PER_USER_TPS_MEAN = "per_user_tps_mean"
PROXY_SPEEDUP = "proxy_speedup"
SPEEDUP_CI_HIGH = "speedup_ci_high"
SPEEDUP_CI_LOW = "speedup_ci_low"
SPEEDUP_ENGINE_CI_HIGH = "speedup_engine_ci_high"
SPEEDUP_ENGINE_CI_LOW = "speedup_engine_ci_low"
SPEEDUP_ENGINE_MEAN = "speedup_engine_mean"
SPEEDUP_HEADLINE_CI_HIGH = "speedup_headline_ci_high"
SPEEDUP_HEADLINE_CI_LOW = "speedup_headline_ci_low"
SPEEDUP_HEADLINE_CLOCK = "speedup_headline_clock"
SPEEDUP_HEADLINE_MEAN = "speedup_headline_mean"
SPEEDUP_MEAN = "speedup_mean"
