"""Empirical label-DP auditing (one training run; Steinke, Nasr & Jagielski 2023).

Modules (import the one you need; the package re-exports nothing, so planning the audit, which every
Snakefile parse does through :mod:`labeldp.audit.plan`, loads neither scipy.stats nor the accountant):

- :mod:`labeldp.audit.one_run`: label canaries, their scores and the one-run eps lower bound
  (``make_label_canaries``, ``canary_scores``, ``audit``, ``epsilon_lower_bound``, ``p_value``);
- :mod:`labeldp.audit.plan`: the audit's runs and jobs from the config's ``audit`` block;
- :mod:`labeldp.audit.runner` / :mod:`labeldp.audit.sweep`: one audited run, and a job of them;
- :mod:`labeldp.audit.table`: the audit table from the records.
"""
