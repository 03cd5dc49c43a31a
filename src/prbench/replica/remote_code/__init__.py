"""Remote-code modules copied into replica model folders (loaded with trust_remote_code).

They are written by this project to mimic two hub interfaces, not copied from the hub:
- `internlm2_*`: an InternLM2-reward-style AutoModel reading the reward at an appended
  `config.reward_token_id`, with the model card's `get_score(tokenizer, chat)`;
- `armorm_modeling_custom.py`: an ArmoRM-style classifier whose output carries `.score` of shape
  (B,), finding each row's end from the first `config.pad_token_id`, and importing a docstring
  constant that transformers 5 removed (as the hub code does) - the loader's compatibility path.
These files are data: nothing in the package imports them.
"""
