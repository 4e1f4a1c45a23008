"""The wiki itself: page text (frontmatter, slugs, wikilinks), the page store and its projections."""
