-- How a tenant's model provider of kind `openai` is sent an answer's token limit
-- (`max_tokens` or `max_completion_tokens`); NULL: by the rule of its base URL's host.
ALTER TABLE providers ADD COLUMN token_limit TEXT;
