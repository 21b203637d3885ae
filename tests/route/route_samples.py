"""Text samples shared by the route tests."""

PROSE = (
    "The river town grew slowly through the nineteenth century, its mills turning grain from the valley "
    "farms into flour that barges carried downstream. Records from the period describe floods in 1851 and "
    "1867, after which the levee was raised and the lower streets were abandoned to warehouses. "
)
WEB_PAGE = (
    "Home | Products | Blog | Contact us\nSkip to content\nBest garden hoses of the year\nPosted by admin on "
    + PROSE * 3
    + "\nShare this: Facebook Twitter\nLeave a comment\nSubscribe to our newsletter\n"
    "Privacy Policy | Terms of Use\n© 2021 Garden Store. All rights reserved.\n"
)
