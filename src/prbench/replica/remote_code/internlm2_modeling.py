"""InternLM2-reward-style reward model (replica interface, written for prbench).

AutoModel class; the reward is a scalar head on the hidden state of the last attended token,
where callers put `config.reward_token_id` (see `get_score`, the model card's usage)."""
import torch
from torch import nn
from transformers import LlamaModel, PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast

from .configuration_internlm2 import InternLM2Config


class InternLM2PreTrainedModel(PreTrainedModel):
    config_class = InternLM2Config
    base_model_prefix = "model"
    _no_split_modules = ["LlamaDecoderLayer"]


class InternLM2ForRewardModel(InternLM2PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.v_head = nn.Linear(config.hidden_size, 1, bias=False)
        self.reward_token_id = config.reward_token_id
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                            position_ids=position_ids).last_hidden_state
        values = self.v_head(hidden).squeeze(-1)
        ends = attention_mask.cumsum(dim=1).argmax(dim=1).view(-1, 1)  # last attended position
        return SequenceClassifierOutputWithPast(logits=torch.gather(values, 1, ends))

    @torch.no_grad()
    def get_score(self, tokenizer, conversation):
        text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=False)
        ids = tokenizer.encode(text, return_tensors="pt", add_special_tokens=False)
        ids = torch.cat([ids, torch.tensor([[self.reward_token_id]], dtype=torch.long)], dim=1).to(self.device)
        return self.forward(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0].item()
