"""The embedded demo: the bundled real PLACSP pages served as a site on loopback."""
