"""ArmoRM-style multi-objective reward model (replica interface, written for prbench).

Like the hub code it imports a docstring constant from transformers' Llama module that
transformers 5 removed, so it needs prbench's compatibility path to import. Output: `.score` of
shape (B,) (and `logits=score`); each row's end is found from the first `config.pad_token_id`."""
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from transformers import LlamaModel, LlamaPreTrainedModel
from transformers.models.llama.modeling_llama import LLAMA_INPUTS_DOCSTRING
from transformers.utils import ModelOutput, add_start_docstrings_to_model_forward


@dataclass
class CustomOutput(ModelOutput):
    rewards: Optional[torch.FloatTensor] = None
    hidden_state: Optional[torch.FloatTensor] = None
    score: Optional[torch.FloatTensor] = None
    gating_output: Optional[torch.FloatTensor] = None
    logits: Optional[torch.FloatTensor] = None


class LlamaForRewardModelWithGating(LlamaPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        n = int(getattr(config, "num_objectives", 4))
        self.regression_layer = nn.Linear(config.hidden_size, n, bias=False)
        self.gating = nn.Linear(config.hidden_size, n)
        self.post_init()

    @add_start_docstrings_to_model_forward(LLAMA_INPUTS_DOCSTRING)
    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        ends = torch.eq(input_ids, self.config.pad_token_id).int().argmax(-1) - 1
        ends = ends % input_ids.shape[-1]  # no pad in the row: its last token
        rows = torch.arange(input_ids.shape[0], device=hidden.device)
        last = hidden[rows, ends]
        rewards = self.regression_layer(last)
        gate = torch.softmax(self.gating(hidden[rows, 0]), dim=-1)
        score = (rewards * gate).sum(dim=-1)
        return CustomOutput(rewards=rewards, hidden_state=last, score=score, gating_output=gate, logits=score)
