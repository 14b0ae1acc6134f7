"""What a config may say, checked before any model is built: the typed fields
(:mod:`zoo.schema.fields`), the checks that name field, value and expectation
(:mod:`zoo.schema.checks`), the analysis of a backbone's graph that proves its taps
(:mod:`zoo.schema.graph`) and the preprocessing rule a config declares
(:mod:`zoo.schema.preprocessing`)."""
