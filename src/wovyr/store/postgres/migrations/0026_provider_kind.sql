-- The protocol a tenant's model provider speaks: `openai` (chat completions, every provider
-- stored before this migration) or `anthropic` (the Messages API).
ALTER TABLE providers ADD COLUMN kind text NOT NULL DEFAULT 'openai';
