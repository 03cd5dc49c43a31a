"""InternLM2-reward-style configuration (replica interface, written for prbench)."""
from transformers import LlamaConfig


class InternLM2Config(LlamaConfig):
    model_type = "internlm2"

    def __init__(self, reward_token_id=None, **kwargs):
        self.reward_token_id = reward_token_id
        super().__init__(**kwargs)
