-- A tenant's model provider may carry provider parameters sent with every call (`options`,
-- a JSON object checked against its kind's allow-list) and prices per model (`prices`,
-- JSON `{model: {input, output}}` per 1M tokens, over price_in and price_out). NULL: none.
ALTER TABLE providers ADD COLUMN options jsonb;
ALTER TABLE providers ADD COLUMN prices jsonb;
