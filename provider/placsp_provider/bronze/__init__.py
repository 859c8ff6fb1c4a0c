"""The raw Bronze area: landed feed pages, content-addressed, and a manifest per interval."""
