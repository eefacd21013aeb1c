# up to 4 concurrent requests, each with 4096 max context
llama-server -m model.gguf -c 16384 -np 4
