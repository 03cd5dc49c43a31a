"""Models the DAG trains itself (the demo): `rm` fine-tunes the demo's reward-model zoo from MiniLM
(rule train_demo_rm), `policy` trains the demo policy from scratch (rule train_demo_policy)."""
