# Owned by the template: changes here are overwritten by `copier update`. Put your own cases in evals/cases.yaml.
"""`uv run evaluate`: whether the agent is any good, measured on the owner's evaluation set with MLflow.

    cases.py          evals/cases.yaml (or .jsonl): the cases, their turns and expectations, checked
    conversation.py   the app in process (or at --url), sent each turn the way the chat page sends it, traced
    scorers.py        the deterministic scorers, and MLflow's judges when a judge model is given
    simulate.py       --simulate N: MLflow's ConversationSimulator, a failed turn kept and failed
    report.py         pass rates against the file's thresholds: the table, the JSON, the exit status
    from_feedback.py  --from-feedback: thumbs-down conversations (observability/feedback.py) written as new cases
    cli.py            the command: flags, .env, the offline judge, one MLflow run

Nothing here is imported by the served app: evaluation loads only when the command runs.
"""
